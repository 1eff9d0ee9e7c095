// Light, dark, or the system's: the user's choice, kept in localStorage. A classic script
// loaded (not deferred) in <head>, so the theme is on <html data-theme> before the first paint:
// no flash of the other theme, and no inline script (the chat page's CSP allows none).
//
// "system" follows prefers-color-scheme, also when it changes while the page is open. The
// control is any <select data-theme-select> (options system / light / dark) or radio buttons
// <input data-theme-choice> of those values (the account menu's); they are wired up
// once the document is parsed. `window.tetherTheme` is this script's API (the node tests
// drive it through a fake window).
(function (window) {
  "use strict";
  var KEY = "tether.theme";
  var CHOICES = ["system", "light", "dark"];
  var document = window.document;
  var root = document.documentElement;
  var query = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  /** A stored value as a choice: anything unknown (or nothing) is "system". */
  function normalize(value) {
    return CHOICES.indexOf(value) >= 0 ? value : "system";
  }

  /** The theme a choice shows, given whether the system prefers dark. */
  function resolve(choice, systemDark) {
    choice = normalize(choice);
    if (choice === "system") return systemDark ? "dark" : "light";
    return choice;
  }

  function stored() {
    try {
      return normalize(window.localStorage.getItem(KEY));
    } catch (error) {
      return "system"; // storage disabled: the system's theme, every load
    }
  }

  function apply(choice) {
    choice = normalize(choice);
    root.setAttribute("data-theme", resolve(choice, Boolean(query && query.matches)));
    root.setAttribute("data-theme-choice", choice);
    var selects = document.querySelectorAll ? document.querySelectorAll("select[data-theme-select]") : [];
    for (var i = 0; i < selects.length; i++) selects[i].value = choice;
    var radios = document.querySelectorAll ? document.querySelectorAll("input[data-theme-choice]") : [];
    for (var j = 0; j < radios.length; j++) radios[j].checked = radios[j].value === choice;
  }

  function choose(choice) {
    choice = normalize(choice);
    try {
      if (choice === "system") window.localStorage.removeItem(KEY);
      else window.localStorage.setItem(KEY, choice);
    } catch (error) {
      // Not kept: it still applies to this page.
    }
    apply(choice);
  }

  apply(stored());

  if (query) {
    var follow = function () {
      apply(stored());
    };
    if (query.addEventListener) query.addEventListener("change", follow);
    else if (query.addListener) query.addListener(follow);
  }
  // Another tab changed it: this one follows.
  window.addEventListener("storage", function (event) {
    if (event.key === KEY || event.key === null) apply(stored());
  });

  function wire() {
    var selects = document.querySelectorAll("select[data-theme-select]");
    for (var i = 0; i < selects.length; i++) {
      selects[i].value = stored();
      selects[i].addEventListener("change", function (event) {
        choose(event.target.value);
      });
    }
    var radios = document.querySelectorAll("input[data-theme-choice]");
    for (var j = 0; j < radios.length; j++) {
      radios[j].checked = radios[j].value === stored();
      radios[j].addEventListener("change", function (event) {
        if (event.target.checked) choose(event.target.value);
      });
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();

  window.tetherTheme = { KEY: KEY, normalize: normalize, resolve: resolve, choose: choose, current: stored };
})(window);
