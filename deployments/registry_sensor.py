"""Polling fallback for registries without webhooks: new versions and alias moves become the same
Prefect events the webhook receiver emits.

Each poll reads a watermark from a Prefect Variable (``fairengine-registry-watermark``)::

    {"versions": {"<model>": <highest version seen>},
     "aliases": {"<model>": {"<alias>": "<version>"}}}

asks MLflow for ``search_model_versions("name='<model>' AND version_number > <watermark>",
order_by=["version_number ASC"])`` and the registered model's aliases (``search_model_versions``
does not return aliases), dispatches one ``mlflow.model_version.created`` event per new version
and one ``mlflow.model_version_alias.created`` per alias that is new or points elsewhere, and
advances the watermark past every event that was handed to Prefect (so a failed dispatch is
retried on the next poll).

The first poll (no Variable yet) only records where the registry stands, unless
``backfill=True``; a model that appears later is new, and all its versions are reported. Event
ids are deterministic (:mod:`deployments.registry_events`), so running the sensor beside the
webhook receiver audits each version once.

Serve it on an interval (``python -m deployments.serve --sensor-interval 60``), or poll once::

    PREFECT_API_URL=... MLFLOW_TRACKING_URI=... python -m deployments.registry_sensor --model m
"""

from __future__ import annotations

import argparse
from typing import Any

from prefect import flow, get_run_logger

from deployments.registry_events import RegistryEvent

WATERMARK_VARIABLE = "fairengine-registry-watermark"
SENSOR_FLOW_NAME = "fairengine-registry-sensor"


def _quote(name: str) -> str:
    return f'"{name}"' if "'" in name else f"'{name}'"


def list_model_names(client: Any) -> list[str]:
    """Every registered model name (all pages)."""
    names: list[str] = []
    token = None
    while True:
        page = client.search_registered_models(max_results=200, page_token=token)
        names.extend(m.name for m in page)
        token = page.token
        if not token:
            return sorted(names)


def new_versions(client: Any, name: str, after: int) -> list[str]:
    """Versions of ``name`` numbered above ``after``, ascending (all pages)."""
    out: list[str] = []
    token = None
    while True:
        page = client.search_model_versions(
            f"name={_quote(name)} AND version_number > {int(after)}",
            order_by=["version_number ASC"],
            max_results=200,
            page_token=token,
        )
        out.extend(str(mv.version) for mv in page)
        token = page.token
        if not token:
            return sorted(set(out), key=int)


def current_aliases(client: Any, name: str) -> dict[str, str]:
    try:
        return {a: str(v) for a, v in (client.get_registered_model(name).aliases or {}).items()}
    except Exception:  # the model does not exist (yet)
        return {}


def poll_registry(
    client: Any,
    state: dict[str, Any] | None,
    model_names: list[str] | None,
    *,
    backfill: bool = False,
    watch_aliases: bool = True,
    ignored_aliases: frozenset[str] = frozenset({"fair-approved"}),
) -> tuple[list[RegistryEvent], dict[str, Any]]:
    """One poll: the events to emit (in order) and the watermark after all of them.

    Pure given ``client`` (an ``MlflowClient`` or a fake): no Prefect involved.
    """
    first = state is None
    versions: dict[str, int] = {k: int(v) for k, v in ((state or {}).get("versions") or {}).items()}
    aliases: dict[str, dict[str, str]] = {
        k: dict(v) for k, v in ((state or {}).get("aliases") or {}).items()
    }
    names = model_names if model_names else list_model_names(client)
    events: list[RegistryEvent] = []
    for name in names:
        found = new_versions(client, name, versions.get(name, 0))
        seen_aliases = current_aliases(client, name) if watch_aliases else {}
        if first and not backfill:
            versions[name] = int(found[-1]) if found else versions.get(name, 0)
            aliases[name] = seen_aliases
            continue
        for v in found:
            events.append(RegistryEvent("model_version.created", name, v, source="sensor"))
            versions[name] = max(versions.get(name, 0), int(v))
        versions.setdefault(name, 0)
        if watch_aliases:
            before = aliases.get(name, {})
            for alias, v in sorted(seen_aliases.items()):
                if before.get(alias) != v and alias not in ignored_aliases:
                    events.append(
                        RegistryEvent(
                            "model_version_alias.created", name, v, alias=alias, source="sensor"
                        )
                    )
            aliases[name] = seen_aliases
    return events, {"versions": versions, "aliases": aliases}


def _watermark_after(
    state: dict[str, Any] | None, events: list[RegistryEvent], done: int, full: dict[str, Any]
) -> dict[str, Any]:
    """The watermark that covers only the first ``done`` events (a dispatch failed after them)."""
    if done == len(events):
        return full
    failed = {e.model_name for e in events[done:]}
    out = {
        "versions": dict((state or {}).get("versions") or {}),
        "aliases": {k: dict(v) for k, v in ((state or {}).get("aliases") or {}).items()},
    }
    for name in full["versions"]:
        if name not in failed:
            out["versions"][name] = full["versions"][name]
            out["aliases"][name] = full["aliases"].get(name, {})
    for e in events[:done]:
        if e.kind == "model_version.created":
            out["versions"][e.model_name] = max(
                int(out["versions"].get(e.model_name, 0)), int(e.model_version)
            )
        else:
            out["aliases"].setdefault(e.model_name, {})[e.alias] = e.model_version
    return out


@flow(name=SENSOR_FLOW_NAME, log_prints=True)
def registry_sensor_flow(
    model_names: list[str] | None = None,
    tracking_uri: str | None = None,
    backfill: bool = False,
    watch_aliases: bool = True,
    ignored_aliases: list[str] | None = None,
    variable_name: str = WATERMARK_VARIABLE,
) -> dict[str, Any]:
    """Poll the MLflow registry once and emit registry events for what changed since last time.

    ``model_names``: the models to watch (default: every registered model). ``tracking_uri``:
    default ``$MLFLOW_TRACKING_URI``. Returns the emitted ``[name, version, event]`` triples.
    """
    from mlflow import MlflowClient
    from prefect.variables import Variable

    from deployments.registry_events import PrefectEventDispatcher
    from tasks.settings import default_tracking_uri

    logger = get_run_logger()
    uri = tracking_uri or default_tracking_uri()
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    state = Variable.get(variable_name, default=None)
    events, full = poll_registry(
        client,
        state if isinstance(state, dict) else None,
        model_names,
        backfill=backfill,
        watch_aliases=watch_aliases,
        ignored_aliases=frozenset(
            ignored_aliases if ignored_aliases is not None else ["fair-approved"]
        ),
    )
    dispatch = PrefectEventDispatcher()
    done = 0
    try:
        for event in events:
            dispatch(event)
            done += 1
            logger.info(
                "Emitted %s for %s v%s", event.event_name, event.model_name, event.model_version
            )
    finally:
        watermark = _watermark_after(state if isinstance(state, dict) else None, events, done, full)
        Variable.set(variable_name, watermark, overwrite=True)
    if state is None and not backfill:
        logger.info("First poll: recorded the registry state %s; nothing emitted", full["versions"])
    return {
        "emitted": [[e.model_name, e.model_version, e.event_name] for e in events],
        "initialised": state is None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m deployments.registry_sensor",
        description="Poll the MLflow registry once and emit FairEngine registry events.",
    )
    parser.add_argument("--model", action="append", default=None, help="model name (repeatable)")
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--backfill", action="store_true", help="report existing versions too")
    parser.add_argument("--no-aliases", action="store_true")
    args = parser.parse_args(argv)
    from tasks.settings import apply_offline_defaults

    apply_offline_defaults()
    out = registry_sensor_flow(
        model_names=args.model,
        tracking_uri=args.tracking_uri,
        backfill=args.backfill,
        watch_aliases=not args.no_aliases,
    )
    import json

    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
