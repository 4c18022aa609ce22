// @ts-check
// The dashboard's only script. Every page works without it; it adds conveniences: a
// confirmation before destructive changes, "select all" for dead letters, and buttons that
// cannot be pressed twice while a change is being sent. Times stay as the server wrote them, in
// UTC like the charts and the time filters, so a page never mixes two zones.
'use strict';

document.addEventListener('DOMContentLoaded', () => {
  for (const form of document.querySelectorAll('form[method="post"]')) {
    form.addEventListener('submit', (event) => {
      const message = form.getAttribute('data-confirm');
      if (message !== null && !window.confirm(message)) {
        event.preventDefault();
        return;
      }
      for (const button of form.querySelectorAll('button[type="submit"]')) {
        // Disabled after this turn, so the button's own name and value are still sent.
        setTimeout(() => button.setAttribute('disabled', ''), 0);
      }
    });
  }

  for (const form of document.querySelectorAll('form.selection')) {
    const header = form.querySelector('thead th');
    const boxes = [...form.querySelectorAll('tbody input[type="checkbox"]:not([disabled])')];
    if (header === null || boxes.length === 0) continue;
    const all = document.createElement('input');
    all.type = 'checkbox';
    all.setAttribute('aria-label', 'Select all');
    all.addEventListener('change', () => {
      for (const box of boxes) if (box instanceof HTMLInputElement) box.checked = all.checked;
    });
    header.append(all);
  }
});
