// /label pages: keyboard shortcuts (1-5 answer, s skip, u undo) and the held-out quality, fetched after the
// page shows so that the next LF never waits for the label model.
(function () {
  "use strict";
  let sent = false;
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || sent) return;
    const t = ev.target;
    if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) return;
    const button = document.querySelector('button[data-key="' + CSS.escape(ev.key.toLowerCase()) + '"]');
    if (!button || button.disabled) return;
    ev.preventDefault();
    sent = true;  // one answer per page: a held-down key must not answer the next LF too
    button.classList.add("pressed");
    button.form.requestSubmit(button);
  });
  window.addEventListener("pageshow", function () { sent = false; });
  // the "preparing a data set" page asks again until the session starts
  const retry = document.querySelector("form.retry");
  if (retry) setTimeout(function () { retry.requestSubmit(); }, 1500);
  const box = document.getElementById("quality");
  if (box && box.dataset.src && !box.textContent.includes("no held-out")) {
    fetch(box.dataset.src, {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        // the fragment is the hub's own server-rendered, escaped HTML
        box.innerHTML = html;
      })
      .catch(function () { box.textContent = "held-out quality unavailable"; });
  }
})();
