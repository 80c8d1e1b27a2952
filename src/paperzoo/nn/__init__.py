"""The shared core: small, general building blocks that depend only on torch."""
