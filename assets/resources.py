"""Resources shared by every domain: settings and the live store, injected by name."""


from typing import Optional

import dagster as dg

from eval_harness.settings import Settings, load_settings
from eval_harness.store import StoreLocation, open_store


class EvalSettings(dg.ConfigurableResource):
    """config.yaml (+ environment) as typed settings. ``config_path`` None: ./config.yaml."""

    config_path: Optional[str] = None
    # Overrides DATABASE_URL (e.g. dg.EnvVar("RAG_DATABASE_URL") or a test database).
    database_url: Optional[str] = None

    def load(self) -> Settings:
        settings = load_settings(self.config_path)
        if self.database_url:
            settings = settings.with_overrides(database_url=self.database_url)
        return settings


class LiveStore(dg.ConfigurableResource):
    """The live Postgres store: DATABASE_URL when set, else the embedded server; migrated."""

    settings: EvalSettings

    def location(self) -> StoreLocation:
        return open_store(self.settings.load())


def default_resources(config_path: Optional[str] = None,
                      database_url: Optional[str] = None) -> dict:
    settings = EvalSettings(config_path=config_path, database_url=database_url)
    return {"settings": settings, "store": LiveStore(settings=settings)}
