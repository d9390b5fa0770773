// The web console's one script: live parts of a page over Server-Sent Events.
// An element with data-live="URL" opens that stream; each `fragment` event names an element
// id (first line) and brings its new HTML (the rest), rendered and escaped on the server.
// Nothing else runs here: forms, confirmations and paging work without JavaScript.
"use strict";

function follow(holder) {
  const status = holder.querySelector("[data-live-status]");
  const say = (text) => { if (status) { status.textContent = text; } };
  const source = new EventSource(holder.dataset.live);
  source.addEventListener("open", () => say("live"));
  source.addEventListener("error", () => say("reconnecting…"));
  source.addEventListener("fragment", (event) => {
    const cut = event.data.indexOf("\n");
    const id = cut < 0 ? event.data : event.data.slice(0, cut);
    const html = cut < 0 ? "" : event.data.slice(cut + 1);
    const target = document.getElementById(id);
    if (target) { target.innerHTML = html; }
  });
  source.addEventListener("end", () => { source.close(); say("finished"); });
}

document.querySelectorAll("[data-live]").forEach(follow);
