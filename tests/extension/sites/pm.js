// The ProseMirror editor chatgpt.com and claude.ai use for their composer
// (claude.ai through Tiptap, which is ProseMirror underneath): a
// contenteditable div.ProseMirror whose document the site reads on send,
// Enter sends, Shift-Enter breaks the line, an empty editor shows a
// placeholder paragraph.
import { EditorState } from "prosemirror-state";
import { EditorView } from "prosemirror-view";
import { schema } from "prosemirror-schema-basic";
import { keymap } from "prosemirror-keymap";
import { baseKeymap, chainCommands, createParagraphNear, liftEmptyBlock, splitBlock, newlineInCode } from "prosemirror-commands";
import { history, undo, redo } from "prosemirror-history";

/**
 * Mounts an editor in `parent`. attributes: on the contenteditable element
 * (id, class, aria-label, …); onChange(text) after every transaction;
 * onEnter() when Enter is pressed (the site sends).
 */
export function mountProseMirror(parent, { attributes = {}, onChange = () => {}, onEnter = () => false, placeholder = "" } = {}) {
  let view;
  const text = () => view.state.doc.textBetween(0, view.state.doc.content.size, "\n", "\n");
  const state = EditorState.create({
    schema,
    plugins: [
      history(),
      keymap({
        Enter: () => onEnter() || true,
        "Shift-Enter": chainCommands(newlineInCode, createParagraphNear, liftEmptyBlock, splitBlock),
        "Mod-z": undo,
        "Mod-y": redo,
        "Mod-Shift-z": redo,
      }),
      keymap(baseKeymap),
    ],
  });
  view = new EditorView(parent, {
    state,
    attributes: (st) => {
      const empty = st.doc.childCount === 1 && st.doc.firstChild.content.size === 0;
      // the empty editor shows the placeholder (CSS on data-empty)
      return { ...attributes, "data-empty": empty ? "true" : "false", "data-placeholder": placeholder };
    },
    dispatchTransaction(tr) {
      view.updateState(view.state.apply(tr));
      if (tr.docChanged) onChange(text());
    },
  });
  return {
    view,
    text,
    clear() {
      view.dispatch(view.state.tr.delete(0, view.state.doc.content.size));
    },
    focus() {
      view.focus();
    },
  };
}
