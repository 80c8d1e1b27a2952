// Typesets the math spans of rendered Markdown ($...$ and $$...$$, escaped text in .math elements) with KaTeX.
document.addEventListener("DOMContentLoaded", function () {
  if (!window.katex) return;
  document.querySelectorAll(".md .math").forEach(function (el) {
    window.katex.render(el.textContent, el, {displayMode: el.classList.contains("block"), throwOnError: false,
                                             trust: false, strict: "ignore"});
  });
});
