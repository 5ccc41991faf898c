// The desk's small amount of script: polling for running work, the queue's keyboard shortcuts, fetch-posting forms.
// Every request carries the page's CSRF token; no inline script is needed (the CSP forbids it).
(function () {
  "use strict";
  const csrf = () => (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  async function getJSON(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) throw new Error(url + ": " + response.status);
    return response.json();
  }

  // An audit that is still pending or running: reload once it has an outcome.
  const status = document.getElementById("audit-status");
  if (status && ["pending", "running"].includes(status.dataset.status)) {
    const poll = async () => {
      try {
        const audit = await getJSON(status.dataset.poll);
        if (audit.status !== status.dataset.status) { window.location.reload(); return; }
      } catch (err) { console.warn(err); }
      setTimeout(poll, 1000);
    };
    setTimeout(poll, 1000);
  }

  // A batch's progress bar.
  const progress = document.getElementById("batch-progress");
  if (progress && progress.dataset.done !== "true") {
    const bar = document.getElementById("batch-bar");
    const count = document.getElementById("batch-count");
    const poll = async () => {
      try {
        const batch = await getJSON(progress.dataset.poll);
        const c = batch.counts;
        const finished = (c.done || 0) + (c.failed || 0) + (c.cancelled || 0);
        bar.value = finished;
        count.textContent = finished + " / " + batch.total + " finished";
        if (batch.done) { window.location.reload(); return; }
      } catch (err) { console.warn(err); }
      setTimeout(poll, 1000);
    };
    setTimeout(poll, 1000);
  }

  // Forms marked data-fetch post with fetch (JSON endpoints), then reload.
  document.querySelectorAll("form[data-fetch]").forEach((form) => {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const response = await fetch(form.action, { method: "POST", headers: { "X-CSRF-Token": csrf() }, credentials: "same-origin" });
      if (!response.ok) alert("Failed: " + response.status);
      window.location.reload();
    });
  });

  // Hovering a claim's row highlights its span in the response.
  document.querySelectorAll("section.claim").forEach((section) => {
    const id = section.id.replace("claim-", "");
    const marks = document.querySelectorAll('mark.hl[data-claims~="' + CSS.escape(id) + '"]');
    section.addEventListener("mouseenter", () => marks.forEach((m) => m.classList.add("active")));
    section.addEventListener("mouseleave", () => marks.forEach((m) => m.classList.remove("active")));
  });

  // The review queue: j/k move, c confirm, o overturn (focus the label), Enter opens the audit.
  const queue = document.getElementById("queue");
  if (queue) {
    const items = Array.from(queue.querySelectorAll(".queue-item"));
    let index = 0;
    const select = (i) => {
      if (!items.length) return;
      index = Math.max(0, Math.min(items.length - 1, i));
      items.forEach((el, k) => el.classList.toggle("current", k === index));
      items[index].focus();
    };
    select(0);
    document.addEventListener("keydown", (event) => {
      const target = event.target;
      const typing = target instanceof HTMLInputElement || target instanceof HTMLSelectElement || target instanceof HTMLTextAreaElement;
      if (typing || event.ctrlKey || event.metaKey || event.altKey || !items.length) return;
      const item = items[index];
      if (event.key === "j") { select(index + 1); event.preventDefault(); }
      else if (event.key === "k") { select(index - 1); event.preventDefault(); }
      else if (event.key === "c") {
        const button = item.querySelector('button[data-key="c"]');
        if (button) { button.click(); event.preventDefault(); }
      } else if (event.key === "o") {
        item.querySelector("select[name=label]").focus();
        event.preventDefault();
      } else if (event.key === "Enter" && target === item) {
        window.location.href = item.dataset.href;
      }
    });
    // Enter in the label chooser overturns.
    items.forEach((item) => {
      const chooser = item.querySelector("select[name=label]");
      chooser.addEventListener("keydown", (event) => {
        if (event.key === "Enter") { event.preventDefault(); item.querySelector('button[data-key="o"]').click(); }
      });
    });
  }
})();
