// ibi's live status page (`--dashboard`): every few seconds, fetch the page again from the server
// that sent it and put its body in place of this one, so the page follows the fleet without a
// reload. Nothing else: no other URL, no storage, no eval, no HTML built here (the server escaped
// the host text in the page it sent; the parsed body is moved in as it is, and its scripts do not
// run). When the server cannot be reached (the deploy ended), the last page stays and says so.
"use strict";
(function () {
  const EVERY_MS = 2000;
  function say(text) {
    const el = document.getElementById("live");
    if (el) el.textContent = text;
  }
  async function update() {
    try {
      const r = await fetch(location.pathname, {
        cache: "no-store",
        credentials: "same-origin",
        redirect: "error",
      });
      if (!r.ok) throw new Error("HTTP " + r.status);
      const page = new DOMParser().parseFromString(await r.text(), "text/html");
      document.body.replaceWith(document.adoptNode(page.body));
      say("Live: updated at " + new Date().toLocaleTimeString() + ".");
    } catch (e) {
      say("Live: ibi could not be reached at " + new Date().toLocaleTimeString() +
        " (" + e.message + "); this is the fleet as it last was, trying again.");
    }
    setTimeout(update, EVERY_MS);
  }
  say("Live: updating every " + EVERY_MS / 1000 + " s.");
  setTimeout(update, EVERY_MS);
})();
