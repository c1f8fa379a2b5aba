"""What a text-search configuration is, read from the server's catalog: everything that makes
``to_tsvector(configuration, text)`` (and so a query's lexemes) what it is.

A configuration's name says nothing about its output: ``ALTER TEXT SEARCH CONFIGURATION
public.eng_custom ALTER MAPPING FOR asciiword WITH simple`` keeps the name and changes every
lexeme of every English word. So whatever the harness derives from parsed text and keeps
(the keyword index, :mod:`eval_harness.datasets.keyword_index`; the candidate cache,
:mod:`eval_harness.retrieval.candidate_cache`) is keyed on the configuration's
*definition*, :func:`configuration_definition`:

* the configuration's schema-qualified name and its **parser** (name and functions,
  ``pg_ts_parser``);
* its **mapping**: per token type, the dictionaries consulted in order
  (``pg_ts_config_map``);
* each mapped **dictionary**: its template (name and functions, ``pg_ts_template``) and its
  options (``pg_ts_dict.dictinitoption``: stop words file, language, ...).

Not seen: the contents of files a dictionary reads (a stop-word, synonym, thesaurus or ispell
file in the server's ``tsearch_data``); changing one and not the dictionary's options goes
unnoticed, as the server's own sessions keep using the dictionary they loaded. Only reads;
the caller's transaction.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import psycopg


def configuration_definition(conn: psycopg.Connection, language: str) -> dict[str, Any]:
    """The definition of text-search configuration ``language`` (as ``regconfig`` reads the
    name: schema-qualified or found on the search path), as plain JSON values:
    ``{"configuration", "parser", "mapping": {token type: [dictionary, ...]},
    "dictionaries": {dictionary: {"template", "options"}}}``. An unknown name raises the
    server's error (``text search configuration "..." does not exist``)."""
    name, parser = conn.execute("""
        SELECT cn.nspname || '.' || c.cfgname,
               jsonb_build_object('name', pn.nspname || '.' || p.prsname,
                                  'start', p.prsstart::text, 'token', p.prstoken::text,
                                  'end', p.prsend::text, 'headline', p.prsheadline::text,
                                  'lextype', p.prslextype::text)
        FROM pg_ts_config c
        JOIN pg_namespace cn ON cn.oid = c.cfgnamespace
        JOIN pg_ts_parser p ON p.oid = c.cfgparser
        JOIN pg_namespace pn ON pn.oid = p.prsnamespace
        WHERE c.oid = %s::regconfig""", (language,)).fetchone()
    mapping: dict[str, list[str]] = {}
    dictionaries: dict[str, dict[str, Any]] = {}
    for token, dictionary, template, options in conn.execute("""
        SELECT t.alias, dn.nspname || '.' || d.dictname,
               jsonb_build_object('name', tn.nspname || '.' || tp.tmplname,
                                  'init', tp.tmplinit::text, 'lexize', tp.tmpllexize::text),
               d.dictinitoption
        FROM pg_ts_config_map m
        JOIN pg_ts_config c ON c.oid = m.mapcfg
        JOIN ts_token_type(c.cfgparser) t ON t.tokid = m.maptokentype
        JOIN pg_ts_dict d ON d.oid = m.mapdict
        JOIN pg_namespace dn ON dn.oid = d.dictnamespace
        JOIN pg_ts_template tp ON tp.oid = d.dicttemplate
        JOIN pg_namespace tn ON tn.oid = tp.tmplnamespace
        WHERE m.mapcfg = %s::regconfig
        ORDER BY t.alias, m.mapseqno""", (language,)):
        mapping.setdefault(token, []).append(dictionary)
        dictionaries[dictionary] = {"template": template, "options": options}
    return {"configuration": name, "parser": parser, "mapping": mapping,
            "dictionaries": dictionaries}


def definition_digest(definition: dict[str, Any]) -> str:
    """A short hash of a definition (:func:`configuration_definition`) for keys."""
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:32]


def definition_change(before: dict[str, Any] | None, now: dict[str, Any]) -> str:
    """What differs between two definitions of a configuration, as the end of a sentence
    ("the text-search configuration public.eng_custom changed: the dictionaries of
    asciiword, word"); ``before`` None: it was not recorded."""
    name = now["configuration"]
    if before is None:
        return f"the definition of text-search configuration {name} was not recorded"
    parts = []
    if before.get("configuration") != name:
        parts.append(f"it is {name} now, was {before.get('configuration')}")
    if before.get("parser") != now["parser"]:
        parts.append("its parser")
    old_map, new_map = before.get("mapping", {}), now["mapping"]
    tokens = sorted(t for t in set(old_map) | set(new_map) if old_map.get(t) != new_map.get(t))
    if tokens:
        shown = ", ".join(tokens[:4]) + (f" and {len(tokens) - 4} more" if len(tokens) > 4 else "")
        parts.append(f"the dictionaries of {shown}")
    old_dicts = before.get("dictionaries", {})
    changed = sorted(d for d, v in now["dictionaries"].items()
                     if d in old_dicts and old_dicts[d] != v)
    if changed:
        parts.append(f"the template or options of {', '.join(changed[:4])}")
    return (f"the text-search configuration {name} changed: "
            f"{'; '.join(parts) or 'its definition'}")
