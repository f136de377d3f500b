"""deploy/kubernetes: schema-valid manifests whose pods configure a working cluster.

Offline: ``kubernetes-validate`` checks every manifest against the bundled OpenAPI
schemas of Kubernetes (strict: unknown fields are errors); the StatefulSet's container
environment, as each pod would get it, is loaded by amcastd's own config loader. Not run
here: a Kubernetes cluster (no API server, no kubelet, no image pulls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from amcast.daemon.config import load_config, split_host_port

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "kubernetes"
VERSION = "1.36.0"


def manifests() -> dict[str, dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    out = {}
    for name in kustomization["resources"]:
        doc = yaml.safe_load((K8S / name).read_text())
        out[doc["kind"]] = doc
    return out


def test_every_manifest_validates_against_the_kubernetes_schemas() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    docs = manifests()
    assert set(docs) == {"Service", "StatefulSet", "PodDisruptionBudget"}
    for doc in docs.values():
        kv.validate(doc, VERSION, strict=True)  # raises ValidationError naming the field
    broken = {**docs["StatefulSet"], "spec": {**docs["StatefulSet"]["spec"], "replica": 3}}
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, VERSION, strict=True)


def pod_environment(container: dict[str, Any], ordinal: int) -> dict[str, str]:
    """What the container's ``sh -c`` hands amcastd in pod ``amcast-<ordinal>``."""
    env = {"HOSTNAME": f"amcast-{ordinal}", "POD_IP": f"10.42.0.{10 + ordinal}"}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"].replace("$(POD_IP)", env["POD_IP"])
    assert 'AMCAST_NODE__ID="${HOSTNAME##*-}"' in container["args"][0]
    env["AMCAST_NODE__ID"] = env["HOSTNAME"].rsplit("-", 1)[1]
    return {k: v for k, v in env.items() if k.startswith("AMCAST_")}


def test_each_pod_gets_its_ordinal_as_node_id_and_the_others_by_dns_name() -> None:
    docs = manifests()
    sts, service = docs["StatefulSet"], docs["Service"]
    replicas = sts["spec"]["replicas"]
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    config_file = REPO / "config" / "amcastd.toml"  # the image's /etc/amcast/amcastd.toml
    for ordinal in range(replicas):
        cfg = load_config(config_file, pod_environment(container, ordinal))
        assert cfg.node.id == ordinal and cfg.node.members == list(range(replicas))
        assert cfg.network.transport == "unicast"
        assert cfg.network.interface == cfg.metrics.address == f"10.42.0.{10 + ordinal}"
        for member in range(replicas):
            host, port = split_host_port(cfg.network.peers[member])
            assert host == f"amcast-{member}.{service['metadata']['name']}"
            assert port == cfg.network.port
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        key_dir = mounts["authkey"]["mountPath"]
        assert cfg.security.key_file == f"{key_dir}/authkey" and mounts["authkey"]["readOnly"]
        assert mounts["state"]["mountPath"] == cfg.node.state_dir  # survives rescheduling
        assert mounts["logs"]["mountPath"] == cfg.logs.dir
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    assert {p["protocol"] for p in service["spec"]["ports"]} == {"UDP", "TCP"}
    secret = next(v for v in pod["volumes"] if v["name"] == "authkey")["secret"]
    assert secret["defaultMode"] == 0o440  # root:fsGroup; amcastd refuses more than that
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"]
    socket_path = pod_environment(container, 0)["AMCAST_API__SOCKET"]
    assert container["readinessProbe"]["exec"]["command"][-2:] == [socket_path, "--health"]
    assert pod["securityContext"]["runAsNonRoot"]
    assert container["securityContext"]["readOnlyRootFilesystem"]


def test_the_disruption_budget_keeps_a_quorum() -> None:
    docs = manifests()
    replicas = docs["StatefulSet"]["spec"]["replicas"]
    assert docs["PodDisruptionBudget"]["spec"]["minAvailable"] == replicas // 2 + 1
    template = docs["StatefulSet"]["spec"]["template"]
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
