"""Labels and owner references on everything the controller creates."""

from __future__ import annotations

from typing import Any

from compaction import names


def component_selector(component: str) -> dict[str, str]:
    """The labels that select one component's Pods (a Deployment's immutable selector)."""
    return {"app.kubernetes.io/name": "compactor", "app.kubernetes.io/component": component}


def managed_labels(component: str, policy: str | None = None) -> dict[str, str]:
    labels = {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE, **component_selector(component)}
    if policy:
        labels[names.POLICY_LABEL] = policy
    return labels


def policy_owner(name: str, uid: str) -> dict[str, Any]:
    """An ownerReference to a policy, so its objects are garbage-collected with it."""
    return {"apiVersion": names.API_VERSION, "kind": names.POLICY_KIND, "name": name,
            "uid": uid, "controller": True, "blockOwnerDeletion": True}
