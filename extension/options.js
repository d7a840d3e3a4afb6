// The options page: the hub's URL and token (chrome.storage.local keys
// `hubUrl` and `token`), whether results go into the chat's input box, and
// the length past which a result is folded (`foldChars`).
"use strict";

const $ = (id) => document.getElementById(id);
const DEFAULT_URL = "ws://127.0.0.1:8765/ws";

async function load() {
  const s = await chrome.storage.local.get(["hubUrl", "token", "insertResult", "autoSubmit", "foldChars"]);
  $("foldChars").value = s.foldChars || 20000;
  $("hubUrl").value = s.hubUrl || DEFAULT_URL;
  $("token").value = s.token || "";
  $("insertResult").checked = !!s.insertResult;
  $("autoSubmit").checked = !!s.autoSubmit;
  $("autoSubmit").disabled = !s.insertResult;
  $("ext-id").textContent = chrome.runtime.id;
  $("origin").textContent = `chrome-extension://${chrome.runtime.id}`;
}

async function showConnection() {
  try {
    const s = await chrome.runtime.sendMessage({ type: "ui-state" });
    $("conn").dataset.state = s.state;
    $("conn").textContent = s.state === "connected" ? `connected to ${s.hubUrl} (${s.tools.length} tools)` : `${s.state}: ${s.message}`;
  } catch (e) {
    $("conn").textContent = `the extension's worker did not answer: ${e.message}`;
  }
}

$("insertResult").onchange = () => {
  $("autoSubmit").disabled = !$("insertResult").checked;
  if (!$("insertResult").checked) $("autoSubmit").checked = false;
};

$("form").onsubmit = async (ev) => {
  ev.preventDefault();
  let url = $("hubUrl").value.trim() || DEFAULT_URL;
  if (!/^wss?:\/\//.test(url)) {
    $("saved").textContent = "The hub URL starts with ws:// (for example ws://127.0.0.1:8765/ws).";
    return;
  }
  await chrome.storage.local.set({
    hubUrl: url,
    token: $("token").value.trim(),
    insertResult: $("insertResult").checked,
    autoSubmit: $("insertResult").checked && $("autoSubmit").checked,
    foldChars: Math.max(1000, Number($("foldChars").value) || 20000),
  });
  $("saved").textContent = "Saved.";
  showConnection();
};

chrome.runtime.onMessage.addListener((m) => {
  if (m && m.type === "toolhub-changed") showConnection();
});

load().then(showConnection);
