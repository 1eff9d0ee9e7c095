// The photos of a transcript entry, read from its content blocks. No DOM here.

import { mediaUrl } from "./api.js";

const INLINE_IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const NOT_DISPLAYED = "[image not displayed]";

/**
 * The photos of a step's content blocks, as `{src}` (a URL to show) or `{missing: true}`.
 * A history read replaces each photo by `{type: "image", imageRef: "<thread>/<entry>/<n>"}`
 * (served by /api/session-media/<ref>) or, for an upload that failed, by the text
 * "[image not displayed]"; a live event may still carry the photo inline (base64).
 */
export function photosOf(content) {
  const photos = [];
  for (const block of Array.isArray(content) ? content : []) {
    if (!block || typeof block !== "object") continue;
    const ref = block.imageRef ?? block.ref;
    if (block.type === "image" && typeof ref === "string" && ref) {
      photos.push({ src: mediaUrl(ref) });
    } else if (block.type === "image") {
      const source = block.source ?? {};
      const type = source.media_type ?? source.mediaType;
      if (source.type === "base64" && BASE64.test(source.data ?? "") && INLINE_IMAGE_TYPES.has(type)) {
        photos.push({ src: `data:${type};base64,${source.data}` });
      } else {
        photos.push({ missing: true });
      }
    } else if (block.type === "text" && block.text === NOT_DISPLAYED) {
      photos.push({ missing: true });
    }
  }
  return photos;
}
