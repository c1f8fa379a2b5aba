"""The chat providers by name: a lazy registry.

Each provider is one module defining ``PROVIDER`` (see :mod:`.base`): a built-in one is the
module of its name in this package (the names are
:data:`eval_harness.settings.judges.BUILT_IN_CHAT_PROVIDERS`); another package adds one by an
entry point of the group ``eval_harness.chat_providers`` (``name = "package.module"``), which the
settings accept in judge specs once the package is installed. A provider is imported only
when something asks for it by name (a judge, the doctor, a cache key), so the SDK of a
provider no judge uses is never imported.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

from eval_harness.settings.judges import BUILT_IN_CHAT_PROVIDERS, chat_providers, plugin_providers

if TYPE_CHECKING:
    from eval_harness.judges.client.providers.base import Provider


def _module_of(name: str) -> str:
    if name in BUILT_IN_CHAT_PROVIDERS:
        return f"{__name__}.{name}"
    plugins = plugin_providers()
    if name not in plugins:
        raise LookupError(f"no chat provider is named {name!r} "
                          f"(known: {', '.join(chat_providers())})")
    return plugins[name]


@cache
def _loaded(module: str) -> Provider:
    provider: Provider = import_module(module).PROVIDER
    return provider


def provider(name: str) -> Provider:
    """The provider named ``name``, its module imported on first use. Raises LookupError for
    a name that is no chat provider."""
    return _loaded(_module_of(name))


def endpoint_of(name: str, base_url: str | None) -> str:
    """The normalised base URL a ``name`` client given ``base_url`` talks to: the provider's
    default server when ``base_url`` is empty (see :func:`.base.normalised_base_url`)."""
    return provider(name).endpoint(base_url)
