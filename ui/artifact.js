// Images stored beside a recording or in a run's folder, fetched with
// get_artifact (base64 + media type) and shown as data: URLs (the page's
// CSP allows img-src data:). A refusal is shown in the figure's place.

import { errorBox, h } from "./dom.js";

/** A <figure> that fills itself with the image `path` of `owner`
 * ({recordingId} or {runId}); `caption` under it. */
export function artifactFigure(hub, owner, path, caption = path) {
  const fig = h("figure", { class: "shot", dataset: { path } },
    h("p", { class: "muted" }, "Loading image…"),
    h("figcaption", {}, h("code", {}, caption)));
  hub.request({ type: "get_artifact", ...owner, path }).then((r) => {
    if (!r.mimeType?.startsWith("image/")) {
      fig.firstChild.replaceWith(h("p", { class: "muted" }, `${r.mimeType}, ${r.bytes} bytes`));
      return;
    }
    const img = h("img", { src: `data:${r.mimeType};base64,${r.data}`, alt: caption, loading: "lazy" });
    fig.firstChild.replaceWith(img);
  }).catch((e) => {
    fig.firstChild.replaceWith(errorBox(e.hubError || { message: e.message }));
  });
  return fig;
}
