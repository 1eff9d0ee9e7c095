// Which icon URLs the page loads: paths on this server only, read as a browser reads them
// (the same rule as chatproject/page_urls.py). "//host" and "/\host" are another origin (a
// backslash is a slash in http(s) URLs), and tabs and newlines are dropped before a URL is
// parsed ("/<tab>/host" is "//host"): a URL holding a backslash, a control character or
// white space is refused whole.

const PLAIN = /^[^\\\u0000-\u0020\u007f]*$/;

/** True when `url` is a path on this server ("/static/x.png"), not another origin. */
export function isServerPath(url) {
  return typeof url === "string" && PLAIN.test(url) && url.startsWith("/") && !url.startsWith("//");
}
