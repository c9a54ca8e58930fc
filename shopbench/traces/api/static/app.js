// The browser's one script: expand or collapse every long block of an episode at once.
// It reads and writes only the page's own elements; it never builds markup from text.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button.toggle-all")) {
    button.addEventListener("click", () => {
      const blocks = document.querySelectorAll("#turns details");
      const open = button.textContent === "expand all";
      for (const d of blocks) d.open = open;
      button.textContent = open ? "collapse all" : "expand all";
    });
  }
});
