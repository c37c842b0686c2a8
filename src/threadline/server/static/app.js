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
    // A subagent's events carry its own sessionId: they go to its box, not the reply.
    const on = (name, handle) =>
      source.addEventListener(name, (event) => {
        const d = JSON.parse(event.data);
        if (d.sessionId && d.sessionId !== sessionId) this.child(name, d);
        else handle(d);
      });
    for (const name of ["subagent_started", "subagent_finished"]) on(name, () => {});
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

  // One box per subagent session, linking to its page, holding its live events.
  child(name, d) {
    this.subagents = this.subagents || new Map();
    let box = this.subagents.get(d.sessionId);
    if (!box) {
      box = el("details", "subagent live-subagent");
      box.open = true;
      const head = el("summary", "", `Subagent ${d.agent || ""} `);
      const link = el("a", "session-link", d.description || "its session");
      link.href = `/sessions/${encodeURIComponent(d.sessionId)}`;
      head.append(link);
      box.append(head);
      box.head = head;
      this.subagents.set(d.sessionId, box);
      this.assistant().append(box);
      this.text = null;
    }
    if (name === "text_delta") {
      if (!box.text) box.append((box.text = el("div", "text")));
      box.text.textContent += d.text;
    } else if (name === "tool_call") {
      box.text = null;
      box.append(el("p", "meta", `Tool call ${d.name}`));
    } else if (name === "tool_result") {
      box.text = null;
      box.append(el("p", "meta", `Result of ${d.name}${d.isError ? " · error" : ""}`));
    } else if (name === "subagent_finished") {
      box.head.append(el("span", "meta", ` · ${d.stopped}`));
    } else if (name !== "subagent_started") {
      box.append(el("p", "notice", `${name}: ${d.kind || ""} ${d.detail || ""}`));
    }
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
