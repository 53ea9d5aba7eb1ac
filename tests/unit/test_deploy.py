"""The cluster image (deploy/Dockerfile) and the KubeRay manifests (deploy/kuberay/) agree with the lock, keep the
course's code out of the image, put the course's storage on the shared volume, and expose nothing.

Fast and offline: no Docker, no Kubernetes, no Ray. The lock and the Dockerfile are read as text, the manifests as
YAML. Each check is a function that returns what is wrong; every test also gives it a broken text, so it can fail.
"""

from __future__ import annotations

import copy
import re
import shlex
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import check_python  # noqa: E402  (the Python range `make setup` reads from pyproject.toml)
from doctor_checks.versions import locked_versions  # noqa: E402  (how the doctor reads the lock's pins)

LOCK = ROOT / "requirements" / "lock.txt"
PYPROJECT = ROOT / "pyproject.toml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / "deploy" / "Dockerfile.dockerignore"
RAYCLUSTER = ROOT / "deploy" / "kuberay" / "raycluster.yaml"
STORAGE = ROOT / "deploy" / "kuberay" / "storage.yaml"

# What the image build may see and copy: the dependency list and the lock, never the course's code.
BUILD_INPUTS = {"pyproject.toml", "requirements/lock.txt", "requirements/overrides.txt"}
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
SHARED_SETTINGS = ("COURSE_DATA_DIR", "COURSE_STORAGE_PATH")


# ---- reading the files -------------------------------------------------------------------------------------------


def instructions(dockerfile_text: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments): continuation lines joined, comment lines dropped."""
    result, pending = [], ""
    for raw in dockerfile_text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, arguments = (pending + line).partition(" ")
        result.append((keyword.upper(), arguments.strip()))
        pending = ""
    return result


def versions_in_tag(image: str) -> tuple[str, tuple[int, int]] | None:
    """(Ray version, (Python major, minor)) from an image tag: ``rayproject/ray:2.60.0-py311-cpu`` and the course's
    ``.../vit-ray-course:ray2.60.0-py311-cpu`` both spell them; None when the tag names neither."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    found = re.fullmatch(r"(?:ray)?(\d+\.\d+\.\d+)-py(\d)(\d+)(?:-.+)?", tag)
    return (found.group(1), (int(found.group(2)), int(found.group(3)))) if found else None


def base_image(dockerfile_text: str) -> str:
    """The image the Dockerfile builds FROM (build arguments left as written: ``...-${VARIANT}``)."""
    bases = [arguments.split()[-1] for keyword, arguments in instructions(dockerfile_text) if keyword == "FROM"]
    assert len(bases) == 1, f"deploy/Dockerfile: expected one FROM (the official rayproject/ray image), got {bases}"
    return bases[0]


def manifest_images(manifest_text: str) -> list[str]:
    """Every ``image:`` in a manifest, commented-out ones too (the GPU worker group is a comment until it is used)."""
    return re.findall(r"^\s*#?\s*(?:-\s*)?image:\s*[\"']?([^\s\"'#]+)", manifest_text, re.MULTILINE)


def yaml_documents(*paths: Path) -> list[dict]:
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]


def raycluster_of(docs: list[dict]) -> dict:
    clusters = [doc for doc in docs if doc.get("kind") == "RayCluster"]
    assert len(clusters) == 1, f"deploy/kuberay/raycluster.yaml: expected one RayCluster, got {len(clusters)}"
    return clusters[0]


def head_container(cluster: dict) -> dict:
    return cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]


def env_of(container: dict) -> dict[str, str]:
    return {item["name"]: item.get("value") for item in container.get("env", [])}


# ---- the checks: each returns what is wrong, as sentences that say what to change ---------------------------------


def base_image_problems(dockerfile_text: str, ray: str, supported: list[tuple[int, int]]) -> list[str]:
    image = base_image(dockerfile_text)
    if not image.startswith("rayproject/ray:"):
        return [f"deploy/Dockerfile builds FROM {image}: build FROM the official rayproject/ray:<ray>-py<python>-cpu"]
    versions = versions_in_tag(image)
    if versions is None:
        return [f"deploy/Dockerfile's base image {image} names no Ray and Python: use rayproject/ray:{ray}-py311-cpu"]
    problems = []
    if versions[0] != ray:
        problems.append(
            f"deploy/Dockerfile's base image has Ray {versions[0]}, the lock ray=={ray}: change its FROM to "
            f"rayproject/ray:{ray}-py... (and the manifest's rayVersion and image tags with it)"
        )
    if versions[1] not in supported:
        problems.append(
            f"deploy/Dockerfile's base image has Python {versions[1][0]}.{versions[1][1]}, which pyproject.toml's "
            f"requires-python does not admit ({', '.join(map(check_python.dotted, supported))}): pick a -pyXY tag "
            "it admits (py311)"
        )
    return problems


def install_problems(dockerfile_text: str, torch: str) -> list[str]:
    """torch first, then the locked dependencies with the overrides; never the course package or its code."""
    problems = []
    steps = instructions(dockerfile_text)
    commands = [
        command.strip()
        for keyword, arguments in steps
        if keyword == "RUN"
        for command in re.split(r";|&&|\|\|", arguments)
        if re.search(r"\bpip install\b", command)
    ]
    torch_at = next((i for i, c in enumerate(commands) if re.search(rf"\btorch=={re.escape(torch)}(?!\S)", c)), None)
    # The install of the course's dependencies: a requirements list (-r) at the lock's versions (-c or -r the lock).
    lock_at = next(
        (
            i
            for i, c in enumerate(commands)
            if re.search(r"(?:^|\s)(?:-c|-r|--constraint|--requirement)\s+requirements/lock\.txt\b", c)
            and re.search(r"(?:^|\s)(?:-r|--requirement)\s+\S+", c)
        ),
        None,
    )
    if torch_at is None:
        problems.append(f"deploy/Dockerfile installs no torch=={torch}: install it first, as `make setup` does")
    if CPU_TORCH_INDEX not in dockerfile_text:
        problems.append(f"deploy/Dockerfile never names {CPU_TORCH_INDEX}: the cpu variant takes torch's CPU build")
    if lock_at is None:
        problems.append(
            "deploy/Dockerfile installs nothing at the lock's versions: `uv pip install -c requirements/lock.txt "
            "--override requirements/overrides.txt ...` (or -r requirements/lock.txt), as `make setup` does"
        )
    elif not re.search(r"--override\s+requirements/overrides\.txt\b", commands[lock_at]):
        problems.append(
            "deploy/Dockerfile installs the locked packages without `--override requirements/overrides.txt`: add it, "
            "as `make setup` does (it keeps a package out that costs every Ray worker 2 s at import)"
        )
    if lock_at is not None and torch_at is not None and torch_at > lock_at:
        problems.append("deploy/Dockerfile installs torch after the locked packages: install torch first")
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        targets = words[words.index("install") + 1 :] if "install" in words else []
        for word in targets:
            if word in (".", "./", "-e", "--editable") or word.startswith((".[", "./[")) or "helpers" in word:
                problems.append(
                    f"deploy/Dockerfile installs the course package ({command!r}): leave it out, the job's runtime "
                    "env ships helpers/ to every node"
                )
                break
    for keyword, arguments in steps:
        if keyword in ("COPY", "ADD"):
            sources = [word for word in arguments.split() if not word.startswith("--")][:-1]
            strays = [source for source in sources if source not in BUILD_INPUTS]
            if strays:
                problems.append(
                    f"deploy/Dockerfile copies {strays} into the image: copy only {sorted(BUILD_INPUTS)}; the course's "
                    "code reaches the nodes through the job's runtime env"
                )
    return problems


def dockerignore_problems(dockerignore_text: str) -> list[str]:
    lines = [line.strip() for line in dockerignore_text.splitlines() if line.strip() and not line.startswith("#")]
    if not lines or lines[0] != "*":
        return ["deploy/Dockerfile.dockerignore must start with `*`: the build sees only what it lets back in"]
    admitted = {line[1:] for line in lines[1:] if line.startswith("!")}
    if admitted - BUILD_INPUTS:
        return [
            f"deploy/Dockerfile.dockerignore lets in {sorted(admitted - BUILD_INPUTS)}: only {sorted(BUILD_INPUTS)}"
        ]
    return []


def ray_version_problems(cluster: dict, ray: str) -> list[str]:
    found = str(cluster["spec"].get("rayVersion"))
    if found != ray:
        return [f"deploy/kuberay/raycluster.yaml: rayVersion is {found!r}, the lock has ray=={ray}: set it to {ray!r}"]
    return []


def image_problems(manifest_text: str, expected: tuple[str, tuple[int, int]]) -> list[str]:
    ray, python = expected
    images = manifest_images(manifest_text)
    if not images:
        return ["deploy/kuberay/raycluster.yaml names no image"]
    problems = []
    for image in images:
        versions = versions_in_tag(image)
        if versions != expected:
            problems.append(
                f"deploy/kuberay/raycluster.yaml uses {image}: tag the image built from deploy/Dockerfile with its Ray "
                f"and Python, as ...:ray{ray}-py{python[0]}{python[1]}-cpu (or -gpu)"
            )
    return problems


def claim_mounts(pod: dict) -> list[tuple[str, str]]:
    """(mountPath, PersistentVolumeClaim name) of each claim the pod's Ray container (its first) mounts."""
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod.get("volumes", [])
        if "persistentVolumeClaim" in v
    }
    return [
        (m["mountPath"], claims[m["name"]]) for m in pod["containers"][0].get("volumeMounts", []) if m["name"] in claims
    ]


def shared_storage_problems(docs: list[dict]) -> list[str]:
    """The head's COURSE_DATA_DIR and COURSE_STORAGE_PATH lie under a ReadWriteMany volume mounted at the same place on
    the head and on every worker."""
    cluster = raycluster_of(docs)
    mounts = claim_mounts(cluster["spec"]["headGroupSpec"]["template"]["spec"])
    if not mounts:
        return [
            "the RayCluster's head mounts no PersistentVolumeClaim: mount the shared volume at /mnt/cluster_storage"
        ]
    mount_path, claim = mounts[0]
    problems = []
    pvcs = {doc["metadata"]["name"]: doc for doc in docs if doc.get("kind") == "PersistentVolumeClaim"}
    if claim not in pvcs:
        problems.append(f"no PersistentVolumeClaim {claim!r} in deploy/kuberay/: define it (storage.yaml)")
    elif "ReadWriteMany" not in pvcs[claim]["spec"].get("accessModes", []):
        problems.append(f"the PersistentVolumeClaim {claim!r} is not ReadWriteMany: every node writes to it")
    env = env_of(head_container(cluster))
    for name in SHARED_SETTINGS:
        value = env.get(name) or ""
        if not value.startswith(mount_path.rstrip("/") + "/"):
            problems.append(
                f"the head's {name} is {value!r}: set it to a folder under the shared volume's mountPath {mount_path}"
            )
    for group in cluster["spec"].get("workerGroupSpecs", []):
        if (mount_path, claim) not in claim_mounts(group["template"]["spec"]):
            problems.append(
                f"worker group {group.get('groupName')!r} does not mount {claim!r} at {mount_path}: mount it as the "
                "head does, or its tasks cannot read the data or write checkpoints"
            )
    return problems


def exposure_problems(docs: list[dict]) -> list[str]:
    """Anything reachable from outside the Kubernetes cluster: LoadBalancer and NodePort Services, ingresses, host
    ports. Instructors use `kubectl port-forward`."""
    problems = []
    outside = ("LoadBalancer", "NodePort")
    for doc in docs:
        kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
        if kind == "Service" and doc.get("spec", {}).get("type") in outside:
            problems.append(f"Service {name} is a {doc['spec']['type']}: use ClusterIP and `kubectl port-forward`")
        if kind in ("Ingress", "Route", "Gateway", "HTTPRoute"):
            problems.append(f"{kind} {name} exposes the cluster: remove it, instructors use `kubectl port-forward`")
        if kind == "RayCluster":
            head = doc["spec"]["headGroupSpec"]
            types = {head.get("serviceType"), head.get("headService", {}).get("spec", {}).get("type")}
            for service_type in types & set(outside):
                problems.append(f"the RayCluster's head Service is a {service_type}: use ClusterIP")
            if head.get("enableIngress"):
                problems.append("the RayCluster sets enableIngress: remove it, instructors use `kubectl port-forward`")
            pods = [head["template"]["spec"]] + [g["template"]["spec"] for g in doc["spec"].get("workerGroupSpecs", [])]
            for pod in pods:
                if pod.get("hostNetwork"):
                    problems.append("a Ray pod sets hostNetwork: remove it, it puts Ray's ports on the node's address")
                for container in pod.get("containers", []):
                    if any("hostPort" in port for port in container.get("ports", [])):
                        problems.append(f"container {container['name']} has a hostPort: remove it")
    return problems


def ray_address_problems(cluster: dict) -> list[str]:
    address = env_of(head_container(cluster)).get("RAY_ADDRESS") or ""
    host = address.rsplit(":", 1)[0]
    service = f"{cluster['metadata']['name']}-head-svc"
    if host != service:
        return [
            f"the head's RAY_ADDRESS is {address!r}: set it to {service}:6379 (the head's Service); a loopback address "
            "tells the course that Ray runs on this machine alone"
        ]
    return []


# ---- the tests: the real files, then a broken copy ----------------------------------------------------------------

LOCK_TEXT = LOCK.read_text()
RAY = locked_versions(LOCK_TEXT).get("ray")
SUPPORTED = check_python.supported_minors(*check_python.required_range(PYPROJECT.read_text()))
TORCH = locked_versions(LOCK_TEXT).get("torch")  # pyproject.toml admits a range; the lock and make setup pin it
DOCKERFILE_TEXT = DOCKERFILE.read_text()
RAYCLUSTER_TEXT = RAYCLUSTER.read_text()
DOCS = yaml_documents(RAYCLUSTER, STORAGE)


def test_the_lock_and_pyproject_pin_what_the_image_needs():
    assert RAY, "requirements/lock.txt pins no ray==: run `make lock`"
    assert TORCH == "2.13.0", (
        f"requirements/lock.txt pins torch=={TORCH}: the Makefile and deploy/Dockerfile install 2.13.0; change all"
    )
    for path in (ROOT / "Makefile", DOCKERFILE, ROOT / "requirements" / "overrides.txt"):
        assert f"torch=={TORCH}" in path.read_text(), f"{path.name} does not install the lock's torch=={TORCH}"
    assert locked_versions("ray[data]==9.9.9\nray==2.59.0 ; sys_platform == 'linux'\n")["ray"] == "2.59.0"
    assert "ray" not in locked_versions("# ray==2.60.0\nraydium==1.0\n")


def test_the_base_image_carries_the_lock_s_ray_and_a_supported_python():
    assert not base_image_problems(DOCKERFILE_TEXT, RAY, SUPPORTED), base_image_problems(
        DOCKERFILE_TEXT, RAY, SUPPORTED
    )
    other_ray = re.sub(r"rayproject/ray:[\d.]+", "rayproject/ray:2.59.0", DOCKERFILE_TEXT)
    assert base_image_problems(other_ray, RAY, SUPPORTED)
    for python in ("py310", "py315"):
        other_python = re.sub(r"-py3\d+", f"-{python}", DOCKERFILE_TEXT)
        assert base_image_problems(other_python, RAY, SUPPORTED), python
    assert base_image_problems(DOCKERFILE_TEXT.replace("rayproject/ray:", "python:"), RAY, SUPPORTED)


def test_the_raycluster_runs_the_lock_s_ray():
    cluster = raycluster_of(DOCS)
    assert cluster["apiVersion"] == "ray.io/v1", "deploy/kuberay/raycluster.yaml: use apiVersion ray.io/v1"
    assert not ray_version_problems(cluster, RAY), ray_version_problems(cluster, RAY)
    other = copy.deepcopy(cluster)
    other["spec"]["rayVersion"] = "2.59.0"
    assert ray_version_problems(other, RAY)


def test_every_image_in_the_manifest_carries_the_dockerfile_s_ray_and_python():
    expected = versions_in_tag(base_image(DOCKERFILE_TEXT))
    assert expected == (RAY, expected[1])
    images = manifest_images(RAYCLUSTER_TEXT)
    assert any(image.endswith("-gpu") for image in images), "keep the commented GPU worker group, on the -gpu image"
    assert not image_problems(RAYCLUSTER_TEXT, expected), image_problems(RAYCLUSTER_TEXT, expected)
    assert image_problems(RAYCLUSTER_TEXT.replace(f"ray{RAY}-", "ray2.59.0-", 1), expected)
    assert image_problems(RAYCLUSTER_TEXT.replace("-py311-gpu", "-py312-gpu"), expected)
    assert image_problems("        image: rayproject/ray:latest\n", expected)


def test_the_image_installs_torch_and_the_lock_and_never_the_course():
    assert not install_problems(DOCKERFILE_TEXT, TORCH), install_problems(DOCKERFILE_TEXT, TORCH)
    broken = {
        "pip install -e .": DOCKERFILE_TEXT + "\nRUN python -m pip install -e .\n",
        "pip install .[dev]": DOCKERFILE_TEXT + "\nRUN pip install --no-deps '.[dev]'\n",
        "COPY .": DOCKERFILE_TEXT + "\nCOPY . /home/ray/vit-ray-course\n",
        "COPY helpers": DOCKERFILE_TEXT + "\nCOPY --chown=1000:100 helpers /home/ray/helpers\n",
        "no torch": DOCKERFILE_TEXT.replace(f"torch=={TORCH}", "torch"),
        "no lock": DOCKERFILE_TEXT.replace("-c requirements/lock.txt --override", "--override"),
        "no overrides": DOCKERFILE_TEXT.replace("--override requirements/overrides.txt", ""),
    }
    for name, text in broken.items():
        assert install_problems(text, TORCH), f"install_problems misses: {name}"
    assert not dockerignore_problems(DOCKERIGNORE.read_text())
    assert dockerignore_problems(DOCKERIGNORE.read_text() + "!helpers/\n")
    assert dockerignore_problems("pyproject.toml\n")


def test_the_head_s_storage_settings_are_on_the_shared_volume():
    assert not shared_storage_problems(DOCS), shared_storage_problems(DOCS)
    head_env = head_container(raycluster_of(DOCS))["env"]
    assert {item["name"] for item in head_env} >= set(SHARED_SETTINGS)

    local = copy.deepcopy(DOCS)
    for item in head_container(raycluster_of(local))["env"]:
        if item["name"] == "COURSE_STORAGE_PATH":
            item["value"] = "/home/ray/results"
    assert shared_storage_problems(local)

    unmounted = copy.deepcopy(DOCS)
    raycluster_of(unmounted)["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["volumeMounts"] = []
    assert shared_storage_problems(unmounted)

    single_node = copy.deepcopy(DOCS)
    for doc in single_node:
        if doc["kind"] == "PersistentVolumeClaim":
            doc["spec"]["accessModes"] = ["ReadWriteOnce"]
    assert shared_storage_problems(single_node)


def test_nothing_is_exposed_beyond_the_cluster():
    assert not exposure_problems(DOCS), exposure_problems(DOCS)
    for service_type in ("LoadBalancer", "NodePort"):
        service = {"kind": "Service", "metadata": {"name": "head"}, "spec": {"type": service_type}}
        assert exposure_problems(DOCS + [service]), service_type
        open_head = copy.deepcopy(DOCS)
        raycluster_of(open_head)["spec"]["headGroupSpec"]["serviceType"] = service_type
        assert exposure_problems(open_head), service_type


def test_the_head_attaches_through_its_service_not_the_loopback():
    cluster = raycluster_of(DOCS)
    assert not ray_address_problems(cluster), ray_address_problems(cluster)
    loopback = copy.deepcopy(cluster)
    for item in head_container(loopback)["env"]:
        if item["name"] == "RAY_ADDRESS":
            item["value"] = "127.0.0.1:6379"
    assert ray_address_problems(loopback)
