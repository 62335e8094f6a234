"""Browser-side behaviour of the explorer, as `gr.HTML(js_on_load=...)` code.

Gradio runs a js_on_load body once per component, with `element` (the component's box,
whose content is replaced on every update, so listeners are delegated from it) and
`trigger(event, data)` (fires the component's Python event, data as gr.EventData).
"""

# The grid: a click (or Enter) on a token pins its details in the panel beside the table.
# Left/Right arrow keys (and p/n) step through the iterations while the explorer is on screen,
# unless the key goes to a text field or the slider (which handles its own arrows).
GRID_JS = r"""
function pin(cell) {
  const panel = element.querySelector('.grid-detail-body');
  if (!panel || !cell.dataset.detail) return;
  element.querySelectorAll('.grid-cell.pinned').forEach((c) => c.classList.remove('pinned'));
  cell.classList.add('pinned');
  panel.innerHTML = cell.dataset.detail;
}
element.addEventListener('click', (event) => {
  const cell = event.target.closest('.grid-cell');
  if (cell && element.contains(cell)) pin(cell);
});
element.addEventListener('keydown', (event) => {
  const cell = event.target.closest('.grid-cell');
  if (cell && (event.key === 'Enter' || event.key === ' ')) { event.preventDefault(); pin(cell); }
});
if (!window.__explorerKeys) {
  window.__explorerKeys = true;
  document.addEventListener('keydown', (event) => {
    const grid = document.getElementById('draft-grid');
    if (!grid || grid.offsetParent === null || event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target.closest('input, textarea, select, [contenteditable="true"]')) return;
    const button = {ArrowRight: 'explorer-next', n: 'explorer-next', ArrowLeft: 'explorer-previous', p: 'explorer-previous'}[event.key];
    if (!button) return;
    event.preventDefault();
    document.getElementById(button)?.click();
  });
}
"""

# The Generate output: a click on a token opens its iteration in the explorer. The output's
# text goes along, so the server can tell a still-streaming (or example) output from the
# stored run the explorer would show.
OUTPUT_JS = r"""
element.addEventListener('click', (event) => {
  const token = event.target.closest('[data-iteration]');
  if (!token || !element.contains(token)) return;
  const text = [...element.querySelectorAll('[data-iteration]')].map((t) => t.textContent).join('');
  trigger('select', {index: parseInt(token.dataset.iteration, 10), value: text});
});
"""

# The presentation toggle: larger type everywhere (app.css, html.presentation).
# The resize event makes every Plotly chart lay itself out again at its zoomed width (app.css).
PRESENTATION_JS = ("(on) => { document.documentElement.classList.toggle('presentation', !!on); "
                   "window.dispatchEvent(new Event('resize')); return on; }")
