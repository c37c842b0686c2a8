// threadline web session browser: delete confirmation and the live prompt box.
// Everything received is shown with textContent, never parsed as HTML.
"use strict";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function details(className, summary, body) {
  const box = el("details", className);
  box.append(el("summary", "", summary), el("pre", "", body));
  return box;
}

function confirmDeletes() {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) {
        event.preventDefault();
        return;
      }
      form.elements.confirm.value = "yes";
    });
  }
}

// One running turn shown as its events arrive over SSE (/v1/sessions/{id}/events).
class LiveTurn {
  constructor(live, status, onEnd) {
    this.live = live;
    this.status = status;
    this.onEnd = onEnd;
    this.block = null;
    this.text = null;
  }

  setState(state, label) {
    this.status.dataset.state = state;
    this.status.textContent = label;
  }

  assistant() {
    if (!this.block) {
      this.block = el("article", "msg role-assistant live-turn");
      const head = el("header");
      head.append(el("span", "role", "assistant"), el("span", "meta", " live"));
      this.block.append(head);
      this.live.append(this.block);
    }
    return this.block;
  }

  follow(sessionId, after) {
    const url = `/v1/sessions/${encodeURIComponent(sessionId)}/events?after=${after}`;
    const source = new EventSource(url);
    this.source = source;
    const on = (name, handle) =>
      source.addEventListener(name, (event) => handle(JSON.parse(event.data)));
    on("turn_started", () => this.setState("running", "Running…"));
    on("text_delta", (d) => {
      if (!this.text) {
        this.text = el("div", "text");
        this.assistant().append(this.text);
      }
      this.text.textContent += d.text;
    });
    on("tool_call", (d) => {
      this.text = null;
      const args = JSON.stringify(d.arguments, null, 2);
      const box = details("tool-call", `Tool call ${d.name}`, args);
      box.dataset.call = d.id;
      this.assistant().append(box);
    });
    on("tool_result", (d) => {
      this.text = null;
      const body = d.content + (d.truncated ? "\n… (the stored result is longer)" : "");
      const label = `Result of ${d.name}${d.isError ? " · error" : ""}`;
      this.assistant().append(details("tool-result", label, body));
    });
    on("context_compacted", (d) => {
      this.text = null;
      const cut = `Context compacted: messages ${d.coversFrom}–${d.coversUpTo} summarised` +
        (d.checkpointNumber ? ` (checkpoint #${d.checkpointNumber})` : "");
      this.live.append(el("div", "checkpoint live-cut", cut));
      this.block = null;
    });
    on("notice", (d) => this.assistant().append(el("p", "notice", `${d.kind}: ${d.detail}`)));
    on("error", (d) => this.assistant().append(el("p", "error", `${d.code}: ${d.message}`)));
    on("events_lost", () =>
      this.live.append(el("p", "notice", "Some events were missed; reload to see the stored turn.")));
    on("turn_finished", (d) => {
      this.end(d.ok ? "finished" : "failed", d.ok ? "Finished." : "The turn failed.");
    });
    on("session_deleted", () => this.end("deleted", "The session was deleted."));
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) this.end("failed", "Lost the event stream.");
    };
  }

  end(state, label) {
    if (this.source) this.source.close();
    this.setState(state, label);
    const reload = el("a", "reload", "Reload to see the stored turn and the new context report");
    reload.href = window.location.pathname;
    this.live.append(reload);
    this.onEnd();
  }
}

function promptBox() {
  const form = document.getElementById("prompt-form");
  if (!form) return;
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");
  const sessionId = form.dataset.session;
  const button = form.querySelector("button[type=submit]");
  const busy = (on) => { button.disabled = on; };

  if (form.dataset.followAfter !== undefined) {
    busy(true);
    new LiveTurn(live, status, () => busy(false)).follow(sessionId, form.dataset.followAfter);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = form.elements.text.value;
    if (!text.trim()) return;
    busy(true);
    const turn = new LiveTurn(live, status, () => busy(false));
    turn.setState("sending", "Sending…");
    let response;
    try {
      response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/prompt`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ text }),
        credentials: "same-origin",
      });
    } catch (err) {
      turn.setState("failed", `Could not reach the server: ${err}`);
      busy(false);
      return;
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      const message = (body.error && body.error.message) || response.statusText;
      turn.setState("failed", `${response.status}: ${message}`);
      busy(false);
      return;
    }
    const user = el("article", "msg role-user live-turn");
    const head = el("header");
    head.append(el("span", "role", "user"), el("span", "meta", ` seq ${body.seq} · to ${body.model}`));
    user.append(head, el("div", "text", text));
    live.append(user);
    form.elements.text.value = "";
    turn.follow(sessionId, body.lastEventId);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  confirmDeletes();
  promptBox();
});
