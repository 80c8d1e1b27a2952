"""paperzoo: papers you can run."""

__version__ = "0.1.0"
