// @ts-check
// The dashboard's only script. Every page works without it; it adds conveniences: a
// confirmation before destructive changes, "select all" for dead letters, buttons that cannot
// be pressed twice while a change is being sent, a theme toggle (remembered), and the live
// refresh of pages that show changing state. Times stay as the server wrote them, in UTC like
// the charts and the time filters, so a page never mixes two zones.
'use strict';

const THEME_KEY = 'workhorse.theme';
const INTERVAL_KEY = 'workhorse.live.interval';
const PAUSED_KEY = 'workhorse.live.paused';
const INTERVALS = [2, 5, 10, 30];

/**
 * localStorage may be switched off: then nothing is remembered.
 * @param {Storage} storage
 * @param {string} key
 * @returns {string | null}
 */
function stored(storage, key) {
  try {
    return storage.getItem(key);
  } catch {
    return null;
  }
}
/**
 * @param {Storage} storage
 * @param {string} key
 * @param {string | null} value
 */
function store(storage, key, value) {
  try {
    if (value === null) storage.removeItem(key);
    else storage.setItem(key, value);
  } catch {
    // Not remembered.
  }
}

// The theme first, so the page is drawn in it: 'light', 'dark', or the system's (no attribute).
const savedTheme = stored(window.localStorage, THEME_KEY);
if (savedTheme === 'light' || savedTheme === 'dark') document.documentElement.setAttribute('data-theme', savedTheme);

// Delegated, so forms a live refresh puts in the page behave like the ones it was loaded with.
document.addEventListener('submit', (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.method !== 'post') return;
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

/** @param {HTMLElement} controls */
function themeToggle(controls) {
  const button = document.createElement('button');
  button.type = 'button';
  button.id = 'theme-toggle';
  const show = () => {
    const theme = document.documentElement.getAttribute('data-theme') ?? 'system';
    button.textContent = `Theme: ${theme}`;
    button.setAttribute('aria-label', `Theme: ${theme} (change)`);
  };
  button.addEventListener('click', () => {
    // system -> dark -> light -> system
    const current = document.documentElement.getAttribute('data-theme');
    const next = current === null ? 'dark' : current === 'dark' ? 'light' : null;
    if (next === null) document.documentElement.removeAttribute('data-theme');
    else document.documentElement.setAttribute('data-theme', next);
    store(window.localStorage, THEME_KEY, next);
    show();
  });
  show();
  controls.append(button);
}

/**
 * True when the user is working in `element`: focus, typed input, a changed choice, an opened detail.
 * @param {Element} element
 * @returns {boolean}
 */
function busy(element) {
  const active = document.activeElement;
  if (active !== null && active !== document.body && element.contains(active)) return true;
  if (element.querySelector('details[open]') !== null || (element instanceof HTMLDetailsElement && element.open)) return true;
  for (const field of element.querySelectorAll('input, textarea, select')) {
    if (field instanceof HTMLInputElement) {
      if ((field.type === 'checkbox' || field.type === 'radio') ? field.checked !== field.defaultChecked : field.value !== field.defaultValue) return true;
    } else if (field instanceof HTMLTextAreaElement) {
      if (field.value !== field.defaultValue) return true;
    } else if (field instanceof HTMLSelectElement) {
      for (const option of field.options) if (option.selected !== option.defaultSelected) return true;
    }
  }
  return false;
}

/**
 * Replaces the parts of `current` that changed in `next`, leaving alone those the user is working in.
 * @param {Element} current
 * @param {Element} next
 */
function patch(current, next) {
  const old = [...current.children];
  const fresh = [...next.children];
  if (old.length !== fresh.length) {
    if (!busy(current)) current.replaceChildren(...fresh.map((node) => document.importNode(node, true)));
    return;
  }
  for (let i = 0; i < old.length; i += 1) {
    if (old[i].outerHTML === fresh[i].outerHTML) continue;
    if (!busy(old[i])) old[i].replaceWith(document.importNode(fresh[i], true));
    // Busy: only the parts around what the user works in are replaced.
    else if (old[i].tagName === fresh[i].tagName && old[i].children.length > 0) patch(old[i], fresh[i]);
  }
}

/**
 * @param {HTMLElement} controls
 * @param {number} defaultSeconds
 */
function liveRefresh(controls, defaultSeconds) {
  const found = document.getElementById('live-body');
  if (found === null) return;
  const body = found;
  const state = document.createElement('span');
  state.className = 'live-state';
  state.id = 'live-state';
  state.setAttribute('role', 'status');
  const pause = document.createElement('button');
  pause.type = 'button';
  pause.id = 'live-pause';
  const every = document.createElement('select');
  every.id = 'live-interval';
  every.setAttribute('aria-label', 'Refresh every');
  const savedSeconds = Number(stored(window.localStorage, INTERVAL_KEY));
  let seconds = INTERVALS.includes(savedSeconds) ? savedSeconds : defaultSeconds;
  for (const value of INTERVALS) {
    const option = document.createElement('option');
    option.value = String(value);
    option.textContent = `every ${value} s`;
    option.selected = value === seconds;
    every.append(option);
  }
  let paused = stored(window.sessionStorage, PAUSED_KEY) === '1';
  let timer = 0;
  let updated = '';

  const show = () => {
    const hidden = document.visibilityState !== 'visible';
    state.dataset.state = paused ? 'paused' : hidden ? 'hidden' : 'live';
    state.textContent = paused ? 'Paused' : hidden ? 'Stopped (tab hidden)' : `Live${updated ? ` · updated ${updated} UTC` : ''}`;
    pause.textContent = paused ? 'Start updates' : 'Stop updates';
  };
  const schedule = () => {
    clearTimeout(timer);
    if (!paused && document.visibilityState === 'visible') timer = window.setTimeout(refresh, seconds * 1000);
    show();
  };
  async function refresh() {
    try {
      const response = await fetch(window.location.href, { headers: { 'X-Workhorse-Live': '1' }, credentials: 'same-origin', cache: 'no-store' });
      if (response.ok && (response.headers.get('Content-Type') ?? '').startsWith('text/html')) {
        const next = new DOMParser().parseFromString(await response.text(), 'text/html').getElementById('live-body');
        if (next !== null && !paused) {
          patch(body, next);
          updated = new Date().toISOString().slice(11, 19);
          body.dispatchEvent(new CustomEvent('workhorse:refreshed', { bubbles: true }));
        }
      }
    } catch {
      // The next turn tries again.
    }
    schedule();
  }
  pause.addEventListener('click', () => {
    paused = !paused;
    store(window.sessionStorage, PAUSED_KEY, paused ? '1' : null);
    schedule();
  });
  every.addEventListener('change', () => {
    seconds = Number(every.value);
    store(window.localStorage, INTERVAL_KEY, String(seconds));
    schedule();
  });
  document.addEventListener('visibilitychange', () => {
    // Hidden: no request at all. Shown again: refreshed at once, then at the interval.
    if (document.visibilityState === 'visible' && !paused) void refresh();
    else schedule();
  });
  controls.append(state, pause, every);
  schedule();
}

document.addEventListener('DOMContentLoaded', () => {
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

  const controls = document.getElementById('controls');
  if (controls === null) return;
  const live = Number(document.body.getAttribute('data-live'));
  if (live > 0) liveRefresh(controls, live);
  themeToggle(controls);
});
