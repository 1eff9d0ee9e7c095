// A Plotly figure drawn at its card's width, in the page's theme.
//
// plotly.js takes its width from its container when it draws; a card built off-screen has
// none, so plotly.js falls back to 700 px and the plot overhangs its card (and a phone). The
// plot is therefore drawn once the card has a width, and drawn again at each new width. The
// figure's own colours win; where it sets none, the page's theme gives the background, text
// and grid colours, and a theme change redraws them.

/** The theme's colours for what a figure's layout leaves unset. */
export function themedLayout(layout, colors) {
  const axis = (given) => ({ gridcolor: colors.grid, zerolinecolor: colors.grid, linecolor: colors.grid, ...given });
  return {
    paper_bgcolor: colors.background,
    plot_bgcolor: colors.background,
    ...layout,
    font: { color: colors.text, ...layout?.font },
    xaxis: axis(layout?.xaxis),
    yaxis: axis(layout?.yaxis),
    autosize: true,
    width: undefined,
  };
}

function themeColors() {
  const style = getComputedStyle(document.documentElement);
  const read = (name) => style.getPropertyValue(name).trim();
  return { background: read("--panel"), text: read("--text"), grid: read("--border") };
}

/** Draw `figure` into `node` with `Plotly` once it has a width; resolves when first drawn. */
export function drawPlot(Plotly, node, figure) {
  const layout = () => themedLayout(figure.layout ?? {}, themeColors());
  const config = { responsive: false, displaylogo: false };
  return new Promise((resolve, reject) => {
    let drawn = false;
    let width = 0;
    const resize = new ResizeObserver(() => {
      const now = Math.round(node.clientWidth);
      if (!now || now === width) return;
      width = now;
      if (!drawn) {
        drawn = true;
        Plotly.newPlot(node, figure.data ?? [], layout(), config).then(resolve, reject);
      } else {
        Plotly.relayout(node, { width: now });
      }
    });
    resize.observe(node);
    new MutationObserver(() => drawn && Plotly.relayout(node, layout())).observe(document.documentElement, {
      attributes: true,
      attributeFilter: ["data-theme"],
    });
  });
}
