"""docs/howto/cluster.md against the installed Ray, read from Ray's own code: the version it names, every port
`ray start` binds with its default, the object store's default size and where an explicit size fails; and the
page's own examples: the Slurm script's choice of the head's address among several, the KubeRay RayJob's
requests and limits."""

import ipaddress
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray", reason="ray is not installed")
scripts = pytest.importorskip("ray.scripts.scripts")
ray_constants = pytest.importorskip("ray._private.ray_constants")
ray_services = pytest.importorskip("ray._private.services")
ray_utils = pytest.importorskip("ray._private.utils")

PAGE = Path(__file__).resolve().parents[1] / "docs" / "howto" / "cluster.md"
MARKDOWN = PAGE.read_text()
TEXT = " ".join(MARKDOWN.split())  # the prose with its line breaks undone
GB = 10**9


def section(title: str) -> str:
    start = MARKDOWN.index(f"## {title}\n")
    end = MARKDOWN.find("\n## ", start + 1)
    return MARKDOWN[start:end if end >= 0 else None]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", MARKDOWN, flags=re.S)


def test_the_page_names_the_installed_ray_version():
    installed = ".".join(ray.__version__.split(".")[:2])
    named = set(re.findall(r"Ray (\d+\.\d+)", TEXT))
    assert named == {installed}


def port_options() -> dict:
    """`ray start`'s port options (hidden ones aside) -> their default: a number, or None where Ray picks a free
    port at start. A default not in the option itself is the one its help states (the GCS's 6379, the client
    server's 10001)."""
    found = {}
    for option in scripts.start.params:
        if "port" not in option.name or option.hidden:
            continue
        default = option.default if isinstance(option.default, int) and option.default > 0 else None
        stated = re.search(r"defaults? to (\d+)", option.help or "")
        found[option.opts[0]] = default if default is not None or stated is None else int(stated.group(1))
    return found


def test_the_ports_table_lists_every_port_ray_start_binds_with_its_default():
    rows = [line.split("|")[1:-1] for line in section("The ports Ray needs").splitlines()
            if line.startswith("| ") and "---" not in line][1:]  # the header row aside
    options = port_options()
    listed = set()
    for _, flags, default in rows:
        listed.update(re.findall(r"`(--[a-z-]+)`", flags))
        # the flags a row's default is of: an alternative in parentheses ("or --worker-port-list") aside
        for flag in re.findall(r"`(--[a-z-]+)`", re.sub(r"\(.*?\)", "", flags)):
            if options[flag] is None:
                assert default.strip().startswith("chosen at start"), flag
            else:
                assert str(options[flag]) in default, (flag, options[flag], default)
    assert listed == set(options)
    assert (options["--min-worker-port"], options["--max-worker-port"]) == (10002, 19999)  # the figures


def test_the_dashboard_is_said_to_bind_to_localhost_as_ray_start_does():
    host = next(option for option in scripts.start.params if option.name == "dashboard_host").default
    assert ipaddress.ip_address(host).is_loopback
    assert "8265, bound to localhost unless `--dashboard-host=0.0.0.0`" in section("The ports Ray needs")


def stated_default_rule() -> tuple[float, int, int, float]:
    """(share of the memory available, cap in bytes, floor in bytes, share of /dev/shm) as the page states them."""
    stated = re.search(r"By default it is (\d+)% of the memory available when Ray starts, at most the smaller of "
                       r"(\d+) GB and the larger of (\d+) GB and (\d+)% of the free space in `/dev/shm`", TEXT)
    share, cap, floor, shm = stated.groups()
    return int(share) / 100, int(cap) * GB, int(floor) * GB, int(shm) / 100


def test_the_stated_default_object_store_size_is_ray_s(monkeypatch):
    share, cap, floor, shm_share = stated_default_rule()
    assert (share, cap, floor) == (ray_constants.DEFAULT_OBJECT_STORE_MEMORY_PROPORTION,
                                   ray_constants.DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES,
                                   ray_constants.REQUIRE_SHM_SIZE_THRESHOLD)
    # the rule as stated, against Ray's own computation, on nodes where each of its terms decides
    for available, shm in ((10**12, 40 * GB), (10**12, GB), (2 * 10**12, 10**12), (16 * GB, 64 << 20)):
        monkeypatch.setattr(ray_utils, "get_shared_memory_bytes", lambda shm=shm: shm)
        stated = min(int(available * share), min(cap, max(floor, int(shm * shm_share))))
        assert ray_utils.resolve_object_store_memory(available) == stated, (available, shm)


def test_an_explicit_size_above_dev_shm_and_the_floor_fails_unless_slow_storage_is_allowed(monkeypatch, tmp_path):
    floor = int(re.search(r"when it is at most (\d+) GB; a larger one stops `ray start` with an error unless "
                          r"`RAY_OBJECT_STORE_ALLOW_SLOW_STORAGE=1` is set", TEXT).group(1)) * GB
    monkeypatch.setattr(ray_utils, "get_shared_memory_bytes", lambda: GB)  # 1 GB free in /dev/shm
    monkeypatch.setattr(ray._common.utils, "get_system_memory", lambda: 10**12)
    monkeypatch.delenv("RAY_OBJECT_STORE_ALLOW_SLOW_STORAGE", raising=False)

    def directory(size: int) -> str:
        return ray_services.determine_plasma_store_config(size, str(tmp_path))[0]

    assert directory(GB // 2) == "/dev/shm"  # room in /dev/shm: there
    assert directory(floor) == str(tmp_path)  # up to the floor: Ray's temporary directory
    with pytest.raises(ValueError, match="RAY_OBJECT_STORE_ALLOW_SLOW_STORAGE"):
        directory(floor + GB)  # above both: refused
    monkeypatch.setenv("RAY_OBJECT_STORE_ALLOW_SLOW_STORAGE", "1")
    assert directory(floor + GB) == str(tmp_path)


def first_ipv4(addresses: str) -> subprocess.CompletedProcess:
    """The Slurm script's own first_ipv4 function, run on `addresses` as `hostname --ip-address` prints them."""
    script = next(block for block in blocks("bash") if "first_ipv4() {" in block)
    function = re.search(r"^first_ipv4\(\) \{\n.*?^\}\n", script, flags=re.S | re.M).group(0)
    return subprocess.run(["bash", "-c", f'{function}\nfirst_ipv4 "$1"', "-", addresses], capture_output=True,
                          text=True)


@pytest.mark.parametrize("addresses, head_ip", [
    ("10.1.2.3", "10.1.2.3"),
    ("fe80::1 10.0.0.7 10.0.0.8", "10.0.0.7"),  # IPv6 first, then two networks: the first IPv4
    ("127.0.1.1 192.168.1.5", "192.168.1.5"),  # Debian's /etc/hosts loopback name first
    ("2001:db8::5", None),  # no IPv4: the script stops, asking for HEAD_IP
])
def test_the_slurm_script_picks_one_head_address_among_several(addresses, head_ip):
    picked = first_ipv4(addresses)
    assert (picked.stdout.strip() or None, picked.returncode) == (head_ip, 0 if head_ip else 1)


def test_the_slurm_script_is_valid_bash():
    script = next(block for block in blocks("bash") if "first_ipv4() {" in block)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_the_rayjob_example_gives_every_container_requests_equal_to_its_limits():
    job = next(yaml.safe_load(block) for block in blocks("yaml") if "kind: RayJob" in block)
    spec = job["spec"]
    assert spec["entrypoint"].startswith("roarfast sweep ") and spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        pod = group["template"]["spec"]
        shm = next(volume for volume in pod["volumes"] if volume["name"] == "shm")["emptyDir"]
        for container in pod["containers"]:
            resources = container["resources"]
            assert resources["requests"] == resources["limits"] and {"cpu", "memory"} <= set(resources["limits"])
            assert {mount["mountPath"] for mount in container["volumeMounts"]} == {"/runs", "/dev/shm"}
        store = group["rayStartParams"].get("object-store-memory")
        if store is not None:  # below /dev/shm's size, so that it lives there
            assert int(store) < quantity(shm["sizeLimit"]) <= quantity(container["resources"]["limits"]["memory"])


def quantity(text: str) -> int:
    """Bytes of a Kubernetes memory quantity (16Gi, 500M)."""
    number, unit = re.fullmatch(r"(\d+)([KMGT]i?)?", text).groups()
    return int(number) * {None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20,
                          "Gi": 2**30, "Ti": 2**40}[unit]
