// agentweb page behaviour: keys, Escape to cancel, slash menu, autoscroll, elapsed time, redirect,
// theme, the shortcut list and relative times.
(function () {
  "use strict";

  const $ = (selector) => document.querySelector(selector);

  function composer() { return $("#message"); }

  // Enter sends, Shift+Enter is a new line; the slash menu takes arrows, Tab and Enter.
  document.addEventListener("keydown", (event) => {
    const box = composer();
    if (event.key === "Escape") {
      // Escape closes what is open first (a dialog, the / or @ menu, the drawers), and
      // cancels a generation only when nothing is.
      if (document.querySelector("dialog[open]")) return;  // the dialog closes itself
      if (openMenu()) { event.preventDefault(); hideMenu(); return; }
      if (closeDrawers()) { event.preventDefault(); return; }
      const cancel = $("#cancel");
      if (cancel) { event.preventDefault(); cancel.click(); }
      return;
    }
    if (!box || event.target !== box) return;
    const menu = openMenu();
    if (menu) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault(); moveSelection(event.key === "ArrowDown" ? 1 : -1); return;
      }
      const choice = selected() || visibleItems()[0];
      // Enter completes a partly typed name; a fully typed command is sent as it is.
      const typedWhole = choice && choice.dataset.name && box.value.trim() === "/" + choice.dataset.name;
      if (choice && (event.key === "Tab" || (event.key === "Enter" && !event.shiftKey && !typedWhole))) {
        event.preventDefault(); complete(choice); return;
      }
    }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (box.value.trim() || attachedIds()) box.form.requestSubmit();
    }
  });

  // Files go with the next message: Attach, paste or drop; each is uploaded at once and shows
  // as a chip (with Remove) until the message is sent; the server says why it refuses one.
  function attachedIds() {
    return Array.from(document.querySelectorAll("#attached li[data-attachment]"))
      .map((chip) => chip.dataset.attachment).join(",");
  }
  function syncAttached() { const field = $("#attachments"); if (field) field.value = attachedIds(); }
  function say(text) {
    const line = document.createElement("p");
    line.className = "notice notice--error"; line.setAttribute("role", "alert"); line.textContent = text;
    const notices = $("#notices");
    if (notices) notices.replaceChildren(line);
  }
  function upload(file) {
    const input = $("#attach"), list = $("#attached");
    if (!input || !list) return;
    const most = Number(input.dataset.maxBytes) || 0;
    if (most && file.size > most) {
      say(`“${file.name}” is ${(file.size / 1048576).toFixed(1)} MB: an attachment may be at most ${(most / 1048576).toFixed(1)} MB.`);
      return;
    }
    const chip = document.createElement("li");
    chip.className = "chip chip--uploading"; chip.textContent = `Uploading ${file.name || "pasted image"}…`;
    list.append(chip);
    const body = new FormData();
    body.append("file", file, file.name || "pasted-image.png");
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    fetch(input.dataset.url, { method: "POST", body, headers: { "X-CSRFToken": token ? token.value : "" }, credentials: "same-origin" })
      .then((response) => response.text().then((html) => ({ ok: response.ok, html })))
      .then(({ ok, html }) => {
        const made = document.createElement("template"); made.innerHTML = html.trim();
        if (ok) { chip.replaceWith(made.content); syncAttached(); return; }
        chip.remove();
        const notices = $("#notices"), said = made.content.querySelector(".notice");
        if (notices && said) notices.replaceChildren(said); else say(`“${file.name}” could not be attached.`);
      })
      .catch(() => { chip.remove(); say(`“${file.name}” could not be uploaded: the server did not answer.`); });
  }
  document.addEventListener("change", (event) => {
    if (event.target.id !== "attach") return;
    Array.from(event.target.files || []).forEach(upload);
    event.target.value = "";
  });
  document.addEventListener("click", (event) => {
    const remove = event.target.closest && event.target.closest("#attached .chip-remove");
    if (!remove) return;
    remove.closest("li").remove(); syncAttached();
    const box = composer(); if (box) box.focus();
  });
  document.addEventListener("paste", (event) => {
    if (!event.target.closest || !event.target.closest("#composer")) return;
    const files = Array.from((event.clipboardData && event.clipboardData.files) || []);
    if (!files.length) return;
    event.preventDefault(); files.forEach(upload);
  });
  document.addEventListener("dragover", (event) => {
    if (event.target.closest && event.target.closest("#composer")) { event.preventDefault(); $("#composer").classList.add("dropping"); }
  });
  document.addEventListener("dragleave", () => { const form = $("#composer"); if (form) form.classList.remove("dropping"); });
  document.addEventListener("drop", (event) => {
    if (!event.target.closest || !event.target.closest("#composer")) return;
    event.preventDefault(); $("#composer").classList.remove("dropping");
    Array.from((event.dataTransfer && event.dataTransfer.files) || []).forEach(upload);
  });

  // The form does not reset itself after a WebSocket send; the message box keeps the focus.
  document.addEventListener("htmx:wsAfterSend", (event) => {
    const form = event.target.closest && event.target.closest("#composer");
    if (form) {
      form.reset(); hideMenu(); composer().focus();
      const list = $("#attached"); if (list) { list.replaceChildren(); syncAttached(); }
      const notices = $("#notices");  // a new message: what the last notice said is over
      if (notices) notices.replaceChildren();
    }
  });
  // A message longer than the server takes is refused here, before it is sent, in the server's
  // words: one over the WebSocket's 1 MB would close the socket, and the box, reset, lose it.
  document.addEventListener("htmx:wsConfigSend", (event) => {
    const limit = Number(($("#composer") || { dataset: {} }).dataset.maxChars) || 0;
    const fields = (event.detail && event.detail.parameters) || {};
    for (const name of ["message", "document"]) {
      const value = fields[name];
      if (!limit || typeof value !== "string" || value.length <= limit) continue;
      const length = Array.from(value).length;  // characters, as the server counts them
      if (length <= limit) continue;
      event.preventDefault();
      const line = document.createElement("p");
      line.className = "notice notice--error";
      line.setAttribute("role", "alert");
      line.textContent = `Message too long: ${length.toLocaleString("en-US")} characters ` +
        `(the limit is ${limit.toLocaleString("en-US")}).`;
      const notices = $("#notices");
      if (notices) notices.replaceChildren(line);
      return;
    }
  });
  // After Cancel (button or Escape), typing goes on in the message box.
  document.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest("#cancel") && composer()) composer().focus();
  });

  // A form that destroys something asks first (its data-confirm text).
  document.addEventListener("submit", (event) => {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // Copy: a message's markdown (as it was written, not as it shows), or a code block's code.
  function copyText(text, button) {
    const done = () => { button.classList.add("copied"); setTimeout(() => button.classList.remove("copied"), 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
      return;
    }
    const area = document.createElement("textarea");  // plain HTTP: the old way
    area.value = text; document.body.appendChild(area); area.select();
    document.execCommand("copy"); area.remove(); done();
  }
  function copyMarkdown(text, button) {
    const done = () => { button.classList.add("copied"); setTimeout(() => button.classList.remove("copied"), 1500); };
    if (navigator.clipboard && window.isSecureContext && window.ClipboardItem) {
      // The promise keeps the click's permission to write while the text is fetched.
      const blob = text.then((t) => new Blob([t], { type: "text/plain" }));
      navigator.clipboard.write([new ClipboardItem({ "text/plain": blob })]).then(done);
      return;
    }
    text.then((t) => copyText(t, button));
  }
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("button.copy");
    if (!button) return;
    const code = button.closest("pre");
    if (code) { copyText((code.querySelector("code") || code).innerText, button); return; }
    const entry = button.closest(".entry");
    const cards = [entry];  // a reply's earlier tool rounds are part of what it says
    for (let part = entry; part.classList.contains("entry--continues") && part.previousElementSibling; ) {
      part = part.previousElementSibling; cards.unshift(part);
    }
    // The markdown as written, from the server (the page carries it rendered only).
    const base = location.pathname.replace(/\/$/, "");
    const texts = Promise.all(cards.filter((card) => /^entry-\d+$/.test(card.id)).map((card) =>
      fetch(`${base}/entries/${card.id.slice(6)}/markdown/`, { credentials: "same-origin" })
        .then((answer) => (answer.ok ? answer.text() : ""))));
    copyMarkdown(texts.then((parts) => parts.map((t) => t.trim()).filter(Boolean).join("\n\n")), button);
  });
  function addCodeCopyButtons() {
    document.querySelectorAll(".entry .markdown pre:not([data-copy])").forEach((pre) => {
      pre.dataset.copy = "";
      const button = document.createElement("button");
      // Its label is CSS content, so it is never part of the text a message's Copy takes.
      button.type = "button"; button.className = "copy copy--code";
      button.setAttribute("aria-label", "Copy code");
      pre.appendChild(button);
    });
  }
  document.addEventListener("DOMContentLoaded", addCodeCopyButtons);
  document.addEventListener("htmx:wsAfterMessage", addCodeCopyButtons);
  document.addEventListener("htmx:afterSwap", addCodeCopyButtons);

  // A message's edit form stays a template until its Edit is opened: a page of many messages
  // would otherwise lay out a hidden text box for each, the longest task of its load.
  document.addEventListener("toggle", (event) => {
    const details = event.target;
    if (!details.open || !details.matches || !details.matches("details.edit")) return;
    const template = details.querySelector(":scope > template");
    if (!template) return;
    template.replaceWith(template.content.cloneNode(true));
    htmx.process(details);
  }, true);

  // Slash-command menu, and the @ menu of sessions to mention: one open at a time.
  const MENUS = ["#slash-menu", "#mention-menu"];
  function openMenu() { return MENUS.map($).find((menu) => menu && !menu.hidden) || null; }
  function options(menu) { return menu ? [...menu.querySelectorAll("[role=option]")] : []; }
  function visibleItems() { return options(openMenu()).filter((li) => !li.hidden); }
  function selected() { return visibleItems().find((li) => li.getAttribute("aria-selected") === "true") || null; }
  function select(item) {
    MENUS.forEach((id) => options($(id)).forEach((li) => li.setAttribute("aria-selected", String(li === item))));
    const box = composer();
    if (box) box.setAttribute("aria-activedescendant", item ? item.id : "");
  }
  function moveSelection(step) {
    const items = visibleItems();
    if (!items.length) return;
    const index = items.indexOf(selected());
    select(items[(index + step + items.length) % items.length]);
  }
  function hideMenu() {
    MENUS.forEach((id) => { const menu = $(id); if (menu) menu.hidden = true; });
    select(null);
  }
  function complete(item) {
    const box = composer();
    if (!item || !box) return;
    if (item.dataset.mention) {  // the "@words" before the caret become "@#42 "
      const before = box.value.slice(0, box.selectionStart).replace(/@[^\s@#]*$/, "@#" + item.dataset.mention + " ");
      box.value = before + box.value.slice(box.selectionStart);
      box.setSelectionRange(before.length, before.length);
    } else {
      box.value = "/" + item.dataset.name + " ";
    }
    hideMenu();
    box.focus();
  }
  function showOnly(menu, keep) {
    let shown = 0;
    options(menu).forEach((li) => { li.hidden = !keep(li); if (!li.hidden) shown += 1; });
    menu.hidden = shown === 0;
    return shown;
  }
  document.addEventListener("input", (event) => {
    const box = composer();
    if (event.target !== box) return;
    const command = /^\/([\w-]*)$/.exec(box.value);
    const mention = /(?:^|\s)@([^\s@#]*)$/.exec(box.value.slice(0, box.selectionStart));
    const menu = command ? $("#slash-menu") : mention ? $("#mention-menu") : null;
    hideMenu();
    if (!menu) return;
    const typed = (command || mention)[1].toLowerCase();
    // (a textarea takes no aria-expanded: the menu's own visibility says it is open)
    showOnly(menu, (li) => command ? li.dataset.name.startsWith(typed) : li.dataset.title.includes(typed));
    select(visibleItems()[0] || null);
  });
  document.addEventListener("click", (event) => {
    const item = event.target.closest && event.target.closest("#slash-menu [role=option], #mention-menu [role=option]");
    if (item) complete(item);
    // A welcome's suggestion: its words in the message box, the cursor after them.
    const fill = event.target.closest && event.target.closest("[data-fill]");
    const box = composer();
    if (fill && box) {
      box.value = fill.dataset.fill;
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    }
  });

  // Follow the conversation while the reader is at the bottom (and after they send); leave a
  // reader who scrolled up alone, with "Jump to latest"; handle redirects.
  // A link to an entry (#entry-N) opens there: the first frames the socket brings must not
  // pull the reader away from it.
  let pinned = !window.location.hash;
  function atBottom() { return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80; }
  function showJump(show) { const jump = $("#jump-latest"); if (jump) jump.hidden = !show; }
  window.addEventListener("scroll", () => {
    pinned = atBottom();
    if (pinned) showJump(false);
    heightSeen = document.documentElement.scrollHeight;
  }, { passive: true });
  document.addEventListener("htmx:wsAfterMessage", () => {
    const redirect = $("#redirect");
    if (redirect && redirect.dataset.url) {
      const url = redirect.dataset.url;
      delete redirect.dataset.url;  // once: a download (/export) leaves the page where it is
      // A handoff's new session (or /new): the message box has the focus there.
      try { if (/^\/sessions\/\d+\/$/.test(url)) sessionStorage.setItem("agentweb-focus", "1"); } catch (e) { /* storage off */ }
      window.location.assign(url);
      return;
    }
    if (pinned) followSoon();
    else if (document.querySelector("main.chat") && grewBelow()) showJump(true);
  });
  // "Jump to latest" only when something new came below the reader: not for a status line, a
  // title or a sidebar pushed meanwhile, nor when the end of the page is in sight already.
  let heightSeen = document.documentElement.scrollHeight;
  function grewBelow() {
    const height = document.documentElement.scrollHeight, grew = height > heightSeen;
    heightSeen = height;
    return grew && !atBottom();
  }
  // Sending brings your message (and the reply after it) into view, wherever you were.
  document.addEventListener("htmx:wsBeforeSend", (event) => {
    if (event.target.closest && event.target.closest("#composer")) { pinned = true; showJump(false); followSoon(); }
  });
  document.addEventListener("click", (event) => {
    if (!(event.target.closest && event.target.closest("#jump-latest"))) return;
    pinned = true; showJump(false); followSoon();
  });
  // Once per painted frame, whatever the frames received: reading scrollHeight at once would
  // force a layout per WebSocket message.
  let following = false;
  function followSoon() {
    if (following) return;
    following = true;
    requestAnimationFrame(() => { following = false; window.scrollTo(0, document.documentElement.scrollHeight); });
  }

  // Older history loads as the reader scrolls up to it, and the page keeps their place.
  let earlierWatch = null;
  function watchEarlier() {
    if (!("IntersectionObserver" in window)) return;
    if (!earlierWatch) {
      earlierWatch = new IntersectionObserver((seen) => {
        seen.forEach((one) => { if (one.isIntersecting && !one.target.disabled) one.target.click(); });
      }, { rootMargin: "600px 0px 0px 0px" });
    }
    document.querySelectorAll("button[data-earlier]:not([data-watched])").forEach((button) => {
      button.dataset.watched = ""; earlierWatch.observe(button);
    });
  }
  let belowEarlier = null;  // how far the page's end was below the reader, before the swap
  document.addEventListener("htmx:beforeSwap", (event) => {
    if (event.detail.target && event.detail.target.classList.contains("earlier")) {
      belowEarlier = document.documentElement.scrollHeight - window.scrollY;
    }
  });
  document.addEventListener("htmx:afterSettle", () => {
    if (belowEarlier !== null) {
      window.scrollTo(0, document.documentElement.scrollHeight - belowEarlier);
      belowEarlier = null;
    }
    watchEarlier();
  });

  // Side by side: bring each column's handoff into view; tabs on a narrow screen.
  function setupCompare() {
    function bringHandoffIntoView(column) {
      const el = column.querySelector("[data-focus]");
      if (!el) return;
      const heading = column.querySelector(":scope > h2");  // sticky: the entry starts below it
      column.scrollTop = el.offsetTop - (heading ? heading.offsetHeight : 0) - 8;  // the column is the offset parent
    }
    document.querySelectorAll(".compare-column").forEach(bringHandoffIntoView);
    const tabs = [...document.querySelectorAll(".compare-tabs [role=tab]")];
    if (!tabs.length) return;
    const narrow = window.matchMedia("(max-width: 40rem)");
    function show(tab, chosen = false) {
      tabs.forEach((t) => {
        const selected = t === tab;
        t.setAttribute("aria-selected", String(selected));
        t.tabIndex = selected ? 0 : -1;
        document.getElementById(t.getAttribute("aria-controls")).hidden = narrow.matches && !selected;
      });
      if (narrow.matches) {
        document.querySelectorAll(".compare-column:not([hidden])").forEach(bringHandoffIntoView);
        // A column as long as its entries: the page scrolls, to the handoff of the one chosen.
        const focus = document.querySelector(".compare-column:not([hidden]) [data-focus]");
        if (chosen) (focus || document.querySelector(".compare-tabs")).scrollIntoView({ block: "center" });
      }
    }
    tabs.forEach((tab) => {
      tab.addEventListener("click", () => show(tab, true));
      tab.addEventListener("keydown", (event) => {
        if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
        const next = tabs[(tabs.indexOf(tab) + 1) % tabs.length];
        next.focus(); show(next, true);
      });
    });
    narrow.addEventListener("change", () => show(tabs.find((t) => t.getAttribute("aria-selected") === "true")));
    show(tabs.find((t) => t.getAttribute("aria-selected") === "true"));
  }
  document.addEventListener("DOMContentLoaded", setupCompare);

  // The todo panel: a drawer, closed at first, on narrow screens, which stays as the reader left
  // it when a change replaces it; the control in use (or the one the change points to) keeps
  // the focus.
  let todoFocus = "";
  let todosClosed = false;
  document.addEventListener("toggle", (event) => {
    if (event.target.id === "todos") todosClosed = !event.target.open;
  }, true);
  document.addEventListener("focusin", (event) => {
    todoFocus = event.target.closest && event.target.closest("#todos") ? event.target.id : "";
  });
  document.addEventListener("htmx:oobAfterSwap", (event) => {
    const panel = event.target;  // the new panel (the event's detail holds the one it replaced)
    if (!panel || panel.id !== "todos") return;
    if (todosClosed) panel.open = false;
    const next = todoFocus && document.getElementById(panel.dataset.focus || todoFocus);
    if (next) next.focus();
  });
  document.addEventListener("DOMContentLoaded", () => {
    const narrow = window.matchMedia("(max-width: 74.99rem)");
    const closeOnNarrow = () => { const panel = $("#todos"); if (panel && narrow.matches) panel.open = false; };
    closeOnNarrow();
    narrow.addEventListener("change", closeOnNarrow);  // a drawer is closed until it is asked for
  });

  // Theme: auto (the system's), dark or light, kept in this browser.
  const THEMES = ["auto", "dark", "light"];
  function currentTheme() { return document.documentElement.dataset.theme || "auto"; }
  function showTheme() {
    const button = $("#theme-toggle");
    if (button) button.textContent = "Theme: " + currentTheme();
  }
  document.addEventListener("click", (event) => {
    if (!(event.target.closest && event.target.closest("#theme-toggle"))) return;
    const next = THEMES[(THEMES.indexOf(currentTheme()) + 1) % THEMES.length];
    if (next === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = next;
    try { if (next === "auto") localStorage.removeItem("agentweb-theme"); else localStorage.setItem("agentweb-theme", next); } catch (e) { /* private mode */ }
    showTheme();
  });
  document.addEventListener("DOMContentLoaded", showTheme);

  // "?" (when not typing) shows the keyboard shortcuts.
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  function showShortcuts() { const dialog = $("#shortcuts"); if (dialog && !dialog.open) dialog.showModal(); }
  document.addEventListener("keydown", (event) => {
    if (event.key === "?" && !typing(event.target) && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault(); showShortcuts();
    }
  });
  document.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest("[data-show-shortcuts]")) showShortcuts();
  });

  // Relative times ("3 minutes ago") kept up to date.
  const relative = new Intl.RelativeTimeFormat("en", { numeric: "always" });  // "1 year ago", as the server writes it
  const UNITS = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60]];
  function ago(seconds) {
    if (seconds < 45) return "now";
    for (const [unit, size] of UNITS) {
      if (seconds >= size) return relative.format(-Math.floor(seconds / size), unit);
    }
    return relative.format(-1, "minute");
  }
  function refreshTimes() {
    document.querySelectorAll("time[data-relative]").forEach((el) => {
      const at = Date.parse(el.getAttribute("datetime"));
      if (!Number.isNaN(at)) el.textContent = ago(Math.max(0, (Date.now() - at) / 1000));
    });
  }
  setInterval(refreshTimes, 30000);
  document.addEventListener("DOMContentLoaded", refreshTimes);
  document.addEventListener("htmx:wsAfterMessage", refreshTimes);

  // Elapsed time of a running generation.
  function tick() {
    document.querySelectorAll(".elapsed[data-since]").forEach((el) => {
      const since = Date.parse(el.dataset.since);
      if (Number.isNaN(since)) return;
      const seconds = Math.max(0, Math.round((Date.now() - since) / 1000));
      el.textContent = seconds < 60 ? seconds + " s" : Math.floor(seconds / 60) + " min " + (seconds % 60) + " s";
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", () => {
    tick();
    if (!document.querySelector("main.chat")) return;
    if (!window.location.hash) window.scrollTo(0, document.documentElement.scrollHeight);
    setTimeout(watchEarlier, 300);  // after the first scroll: no load of what nobody scrolled to
    let arrived = false;  // the page a handoff (or a new session) opened: typing goes on here
    try { arrived = sessionStorage.getItem("agentweb-focus") === "1"; sessionStorage.removeItem("agentweb-focus"); } catch (e) { /* storage off */ }
    if (arrived && composer()) composer().focus();
  });

  // A button that opens a dialog (Share): modal, Escape and Close shut it.
  document.addEventListener("click", (event) => {
    const opener = event.target.closest && event.target.closest("[data-opens]");
    if (!opener) return;
    const dialog = document.getElementById(opener.dataset.opens);
    if (dialog && !dialog.open) dialog.showModal();
  });
  // Copy the link in the Share dialog: a click in its field selects it whole.
  document.addEventListener("focusin", (event) => { if (event.target.id === "share-url") event.target.select(); });

  // The top bar's menu on a phone; drawers (the todo list) close with Escape.
  document.addEventListener("click", (event) => {
    const toggle = event.target.closest && event.target.closest("#menu-toggle");
    if (!toggle) return;
    const bar = toggle.closest(".topbar");
    bar.classList.toggle("open");
    toggle.setAttribute("aria-expanded", String(bar.classList.contains("open")));
  });
  // On a narrow screen a tap outside the open todo drawer closes it.
  document.addEventListener("click", (event) => {
    const panel = $("#todos");
    if (!panel || !panel.open || !window.matchMedia("(max-width: 74.99rem)").matches) return;
    if (event.target.closest && !event.target.closest("#todos")) panel.open = false;
  });
  function closeDrawers() {
    let closed = false;
    if (document.documentElement.classList.contains("sidebar-open")) {
      document.documentElement.classList.remove("sidebar-open");
      const button = $("#sessions-drawer"); if (button) button.setAttribute("aria-expanded", "false");
      closed = true;
    }
    const bar = $(".topbar.open");
    if (bar) { bar.classList.remove("open"); $("#menu-toggle").setAttribute("aria-expanded", "false"); closed = true; }
    const panel = $("#todos");
    if (panel && panel.open && window.matchMedia("(max-width: 74.99rem)").matches) {
      panel.open = false; closed = true;
    }
    return closed;
  }

  // The sidebar of recent sessions: hidden or shown, as the reader left it in this browser.
  function showSidebar(shown) {
    document.documentElement.classList.toggle("sidebar-hidden", !shown);
    const toggle = $("#sidebar-toggle");
    if (toggle) { toggle.textContent = shown ? "Hide" : "Show"; toggle.setAttribute("aria-expanded", String(shown)); }
  }
  document.addEventListener("click", (event) => {
    if (!(event.target.closest && event.target.closest("#sidebar-toggle"))) return;
    const shown = document.documentElement.classList.contains("sidebar-hidden");
    try { localStorage.setItem("agentweb-sidebar", shown ? "shown" : "hidden"); } catch (e) { /* storage off */ }
    showSidebar(shown);
  });
  document.addEventListener("DOMContentLoaded", () => showSidebar(!document.documentElement.classList.contains("sidebar-hidden")));

  // The sidebar: a filter box over its titles; a list pushed over the socket (a new title, a
  // session made, deleted, pinned) marks the session this tab shows, and keeps the filter.
  function sessionShown() {
    const main = document.querySelector("main[ws-connect]");
    const found = main && /\/ws\/sessions\/(\d+)\//.exec(main.getAttribute("ws-connect"));
    return found ? found[1] : "";
  }
  function filterSidebar() {
    const box = $("#sidebar-filter"), items = $("#sidebar-items");
    if (!box || !items) return;
    const words = box.value.trim().toLowerCase();
    items.querySelectorAll("li.sidebar-chain").forEach((li) => { li.hidden = Boolean(words) && !li.dataset.title.includes(words); });
    items.querySelectorAll("ul").forEach((list) => {
      const heading = list.previousElementSibling;
      if (heading) heading.hidden = !list.querySelector("li.sidebar-chain:not([hidden])");
    });
  }
  function markSidebar() {
    const items = $("#sidebar-items");
    if (!items || items.dataset.marked) return;
    items.dataset.marked = "1";
    // A list pushed to every tab carries no CSRF token (each browser has its own): its forms
    // take this page's.
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    items.querySelectorAll("form[method=post]").forEach((form) => {
      if (!token || form.querySelector("input[name=csrfmiddlewaretoken]")) return;
      const field = document.createElement("input");
      field.type = "hidden"; field.name = "csrfmiddlewaretoken"; field.value = token.value;
      form.prepend(field);
    });
    const shown = sessionShown();
    items.querySelectorAll("li.sidebar-chain").forEach((li) => {
      const here = Boolean(shown) && li.dataset.sessions.includes(` ${shown} `);
      li.classList.toggle("sidebar-chain--current", here);
      const link = li.querySelector(":scope > a");
      if (here && link && link.getAttribute("href") === window.location.pathname) link.setAttribute("aria-current", "page");
    });
    filterSidebar();
  }
  document.addEventListener("input", (event) => { if (event.target.id === "sidebar-filter") filterSidebar(); });
  document.addEventListener("htmx:wsAfterMessage", markSidebar);
  document.addEventListener("DOMContentLoaded", () => {
    const items = $("#sidebar-items"); if (items) items.dataset.marked = "1";  // marked by the server
    // A sidebar item's menu links here with #share or #rename: open that.
    if (window.location.hash === "#share") { const open = $("[data-opens=share-dialog]"); if (open) open.click(); }
    if (window.location.hash === "#rename") {
      const rename = $("details.rename"); if (rename) { rename.open = true; const field = $("#id_title"); if (field) field.focus(); }
    }
  });
  // On a narrow screen the sidebar is a drawer the top bar's Sessions opens.
  document.addEventListener("click", (event) => {
    const toggle = event.target.closest && event.target.closest("#sessions-drawer");
    if (toggle) {
      const open = document.documentElement.classList.toggle("sidebar-open");
      toggle.setAttribute("aria-expanded", String(open));
      if (open) { const box = $("#sidebar-filter"); if (box) box.focus(); }
      return;
    }
    if (document.documentElement.classList.contains("sidebar-open") && event.target.closest && !event.target.closest("#sidebar")) {
      document.documentElement.classList.remove("sidebar-open");
      const button = $("#sessions-drawer"); if (button) button.setAttribute("aria-expanded", "false");
    }
  });

  // Enter in a todo item's box saves the list (the box wraps long text, it takes no new line).
  document.addEventListener("keydown", (event) => {
    const box = event.target.closest && event.target.closest("#todos textarea");
    if (!box || event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    event.preventDefault();
    box.dispatchEvent(new Event("change", { bubbles: true }));
  });
})();
