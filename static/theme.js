// The theme chosen in this browser, applied before the first paint (no flash of the other one).
// Loaded without defer on purpose; app.js has the toggle.
try {
  var chosen = localStorage.getItem("agentweb-theme");
  if (chosen === "light" || chosen === "dark") document.documentElement.dataset.theme = chosen;
} catch (e) { /* storage may be off: the system's theme applies */ }
try {
  if (localStorage.getItem("agentweb-sidebar") === "hidden") document.documentElement.classList.add("sidebar-hidden");
} catch (e) { /* storage may be off: the sidebar shows */ }
