"""The Airflow plugin the provider ships: a menu entry (Browse → Reverse ETL syncs) that opens the
sync history page inside the Airflow UI, served by a FastAPI app under the API server at
``/reverse-etl/``.

Airflow loads it through the ``airflow.plugins`` entry point and, with ``lazy_discover_providers``
off, through ``get_provider_info()["plugins"]`` (the way the OpenLineage provider registers its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.plugins_manager import AirflowPlugin

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

#: where the API server mounts the app, and the UI route of the menu entry's page
URL_PREFIX = "/reverse-etl"
UI_ROUTE = "reverse-etl"


class _AppOnFirstRequest:
    """An ASGI app that builds the real one when the first request arrives.

    Every Airflow process that loads plugins (scheduler, task runners, CLI) imports this module, but
    only the API server serves requests: building the FastAPI app there alone spares the others the
    import of the API server's security module."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            from airflow_reverse_etl.ui.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class ReverseEtlUiPlugin(AirflowPlugin):
    name = "reverse_etl"
    # AirflowPlugin's interface is class attributes (read from the class or an instance)
    fastapi_apps = [  # noqa: RUF012
        {"app": _AppOnFirstRequest(), "url_prefix": URL_PREFIX, "name": "Reverse ETL sync history"},
    ]
    external_views = [{  # noqa: RUF012
        "name": "Reverse ETL syncs",
        "href": URL_PREFIX.lstrip("/") + "/",  # relative: it stays right under an API server base path
        "destination": "nav",
        "category": "browse",
        "url_route": UI_ROUTE,
    }]
