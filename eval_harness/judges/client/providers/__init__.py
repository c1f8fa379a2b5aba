"""The chat providers by name: a lazy registry.

Each provider is one module of this package (see :mod:`.base`) defining ``PROVIDER``. A
provider is imported only when something asks for it by name (a judge, the doctor, a cache
key), so the SDK of a provider no judge uses is never imported.

The names a judge spec may use live in :data:`eval_harness.settings.judges.CHAT_PROVIDERS`
(the settings validate ``judges.judge1`` / ``judge2`` and stay below this package); a listed
name is served by the module of the same name here. So a new provider is one module here and
its name in that list. :func:`register_provider` adds one at run time from any module (a
plugin, a test): the name then validates in config and maps to that module.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from eval_harness.settings.judges import (CHAT_PROVIDERS, add_chat_provider,
                                          remove_chat_provider)

if TYPE_CHECKING:
    from eval_harness.judges.client.providers.base import Provider

_MODULES: dict[str, str] = {}  # providers registered at run time: name -> module
_LOADED: dict[str, "Provider"] = {}


def register_provider(name: str, module: str) -> None:
    """Serve judge specs ``name:<model>`` with the ``PROVIDER`` of ``module`` (imported when
    first used); the name is accepted by config validation from now on."""
    _MODULES[name] = module
    _LOADED.pop(name, None)
    add_chat_provider(name)


def unregister_provider(name: str) -> None:
    """Forget a provider registered at run time (its specs are refused again)."""
    if _MODULES.pop(name, None) is not None:
        _LOADED.pop(name, None)
        remove_chat_provider(name)


def provider(name: str) -> "Provider":
    """The provider named ``name``, its module imported on first use. Raises LookupError for
    a name that is no chat provider."""
    found = _LOADED.get(name)
    if found is None:
        if name not in CHAT_PROVIDERS:
            raise LookupError(f"no chat provider is named {name!r} "
                              f"(known: {', '.join(CHAT_PROVIDERS)})")
        found = import_module(_MODULES.get(name, f"{__name__}.{name}")).PROVIDER
        _LOADED[name] = found
    return found


def endpoint_of(name: str, base_url: str | None) -> str:
    """The normalised base URL a ``name`` client given ``base_url`` talks to: the provider's
    default server when ``base_url`` is empty (see :func:`.base.normalised_base_url`)."""
    return provider(name).endpoint(base_url)
