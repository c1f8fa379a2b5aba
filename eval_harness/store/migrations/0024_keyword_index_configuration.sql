-- The keyword index is keyed on the text-search configuration's definition too (issue #32):
-- its parser, its token type -> dictionaries mapping and each dictionary's template and
-- options, as read from the catalog when it was derived
-- (eval_harness/store/text_search.py). A configuration altered since (same name, other
-- lexemes) makes the index stale: attach derives it again, and no command ranks from it
-- meanwhile. NULL (an index derived before this migration): not known, derived again.
-- Owner: eval_harness/store/keyword_index.py.
ALTER TABLE keyword_sources ADD COLUMN definition jsonb;
