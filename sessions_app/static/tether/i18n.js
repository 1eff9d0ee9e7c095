// The web UI's strings in the reader's language. Django's JavaScriptCatalog (/jsi18n/, loaded
// by base.html before the module scripts) defines `django.gettext` and friends; where it is
// absent (node unit tests) the English text is used as is.
const catalog = globalThis.django;

/** The translation of `text` (English when there is none). */
export function gettext(text) {
  return catalog?.gettext ? catalog.gettext(text) : text;
}

/** The singular or plural translation for `count`. */
export function ngettext(singular, plural, count) {
  if (catalog?.ngettext) return catalog.ngettext(singular, plural, count);
  return count === 1 ? singular : plural;
}

/** `text` with `%(name)s` replaced from `values` (as Django's `interpolate(..., true)`). */
export function interpolate(text, values) {
  return text.replace(/%\((\w+)\)s/g, (whole, name) => (name in values ? String(values[name]) : whole));
}
