"""A stand-in of the Hugging Face Hub on 127.0.0.1, for the real-sources rehearsal (``HF_ENDPOINT``).

It answers the part of the Hub's HTTP API that huggingface_hub, datasets and transformers use to read a public
repository: repository info (``/api/{models,datasets}/<id>/revision/<rev>``), file listings (``tree``,
``paths-info``), and files (``/<id>/resolve/<rev>/<path>`` and ``/datasets/<id>/resolve/...``, with ranges), with the
Hub's headers (``X-Repo-Commit``, ``ETag``, ``X-Linked-Size``). A renamed repository is answered with a 307 redirect
to its new id, as the Hub does. What it serves is a folder per repository: ``<root>/<models|datasets>/<id>/...``.
Every request is logged (:attr:`StandinHub.requests`), so a test can say what the clients asked for.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"  # one revision for every repository
LFS_FROM = 10_000  # files of this many bytes or more are answered as LFS files (X-Linked-Etag, an lfs entry)
KINDS = {"models": "model", "datasets": "dataset"}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class StandinHub(ThreadingHTTPServer):
    """The server: ``root`` holds the repositories, ``renamed`` maps old ids to new ones (``{"beans": "ns/beans"}``)."""

    daemon_threads = True

    def __init__(self, root: Path, renamed: dict[str, str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root, self.renamed = Path(root), dict(renamed or {})
        self.requests: list[str] = []
        self._oids: dict[Path, str] = {}

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def repo_folder(self, kind: str, repo_id: str) -> Path | None:
        folder = self.root / kind / repo_id
        return folder if repo_id.count("/") == 1 and folder.is_dir() else None

    def oid(self, path: Path) -> str:
        if path not in self._oids:
            self._oids[path] = _sha256(path)
        return self._oids[path]

    def entry(self, folder: Path, path: Path) -> dict:
        """A tree / paths-info entry, as the Hub writes it."""
        name = path.relative_to(folder).as_posix()
        if path.is_dir():
            return {"type": "directory", "oid": hashlib.sha1(name.encode()).hexdigest(), "size": 0, "path": name}
        size, oid = path.stat().st_size, self.oid(path)
        entry = {"type": "file", "oid": hashlib.sha1(oid.encode()).hexdigest(), "size": size, "path": name}
        if size >= LFS_FROM:
            entry["lfs"] = {"oid": oid, "size": size, "pointerSize": 134}
        return entry


class _Handler(BaseHTTPRequestHandler):
    server: StandinHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass

    # -- answers --------------------------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, head: bool = False) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, value: object, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, message: str, head: bool = False) -> None:
        code = {404: "RepoNotFound" if "Repository" in message else "EntryNotFound"}.get(status, "")
        body = json.dumps({"error": message}).encode()
        self._send(
            status, body, {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message}, head
        )

    def _redirect(self, location: str, head: bool = False) -> None:
        self._send(307, b"", {"Location": location}, head)

    # -- routing --------------------------------------------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802 (the base class's name)
        self._route(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._route(head=False)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self._route(head=False, body=body)

    def _route(self, head: bool, body: str = "") -> None:
        url = urlsplit(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        self.server.requests.append(f"{self.command} {path}")
        api = re.fullmatch(r"/api/(models|datasets)/(.+?)(?:/(revision|tree|paths-info)/([^/]+)(/.*)?)?/?", path)
        if api:
            kind, repo_id, verb, _revision, rest = api.groups()
            if "/" in repo_id and repo_id.count("/") > 1:  # /api/models/<id> followed by something else
                return self._error(404, f"Unknown route {path}", head)
            return self._api(kind, repo_id, verb or "revision", (rest or "").strip("/"), query, body, head)
        resolve = re.fullmatch(r"/(datasets/)?(.+?)/resolve/([^/]+)/(.+)", path)
        if resolve:
            kind = "datasets" if resolve.group(1) else "models"
            return self._resolve(kind, resolve.group(2), resolve.group(3), resolve.group(4), head)
        self._error(404, f"Unknown route {path}", head)

    def _repository(self, kind: str, repo_id: str, head: bool) -> Path | None:
        """The repository's folder; else the answer is sent (a redirect for a renamed id, a 404) and None returned."""
        folder = self.server.repo_folder(kind, repo_id)
        if folder is None:
            new = self.server.renamed.get(repo_id)
            if new and self.server.repo_folder(kind, new):
                old = f"/{repo_id}/" if f"/{repo_id}/" in self.path else f"/{repo_id}"
                self._redirect(self.path.replace(old, old.replace(repo_id, new), 1), head)
            else:
                self._error(404, f"Repository not found: {repo_id}", head)
        return folder

    def _api(self, kind: str, repo_id: str, verb: str, rest: str, query: dict, body: str, head: bool) -> None:
        folder = self._repository(kind, repo_id, head)
        if folder is None:
            return None
        if verb == "revision":
            return self._json(self._info(kind, repo_id, folder))
        if verb == "tree":
            start = folder / rest if rest else folder
            if not start.exists():
                return self._error(404, f"Entry not found: {rest}", head)
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            paths = sorted(start.rglob("*") if recursive else start.iterdir())
            return self._json([self.server.entry(folder, p) for p in paths if not p.name.startswith(".hub")])
        # paths-info: a form (paths=a&paths=b) or JSON ({"paths": [...]})
        try:
            paths = json.loads(body)["paths"] if body.lstrip().startswith("{") else parse_qs(body).get("paths", [])
        except (ValueError, KeyError):
            paths = []
        found = [folder / p for p in paths if (folder / p).exists()]
        self._json([self.server.entry(folder, p) for p in found])

    def _info(self, kind: str, repo_id: str, folder: Path) -> dict:
        siblings = [{"rfilename": p.relative_to(folder).as_posix()} for p in sorted(folder.rglob("*")) if p.is_file()]
        info = {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": COMMIT,
            "lastModified": "2026-11-01T00:00:00.000Z",
            "private": False,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
        }
        card = folder / "README.md"
        if card.exists():
            match = re.match(r"^---\n(.*?)\n---", card.read_text(), re.S)
            if match:
                import yaml

                info["cardData"] = yaml.safe_load(match.group(1))
        if kind == "models":
            config = folder / "config.json"
            info["config"] = json.loads(config.read_text()) if config.exists() else {}
            info["library_name"] = "transformers"
        return info

    def _resolve(self, kind: str, repo_id: str, revision: str, name: str, head: bool) -> None:
        folder = self._repository(kind, repo_id, head)
        if folder is None:
            return None
        path = folder / name
        if not path.is_file():
            return self._error(404, f"Entry not found: {name}", head)
        data_size = path.stat().st_size
        entry = self.server.entry(folder, path)
        etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
        headers = {
            "X-Repo-Commit": COMMIT,
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if "lfs" in entry:
            headers |= {"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(data_size)}
        start, end, status = 0, data_size - 1, HTTPStatus.OK
        ranged = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if ranged and data_size:
            first, last = ranged.groups()
            if first:
                start, end = int(first), min(int(last), data_size - 1) if last else data_size - 1
            else:  # the last N bytes
                start = max(data_size - int(last), 0)
            if start >= data_size:
                return self._send(416, b"", {"Content-Range": f"bytes */{data_size}"}, head)
            status = HTTPStatus.PARTIAL_CONTENT
            headers["Content-Range"] = f"bytes {start}-{end}/{data_size}"
        self.send_response(status)
        for header, value in headers.items():
            self.send_header(header, value)
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if head:
            return
        with path.open("rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


@contextmanager
def standin_hub(root: Path, renamed: dict[str, str] | None = None) -> Iterator[StandinHub]:
    """Serve ``root`` on 127.0.0.1 (a free port) until the block ends."""
    server = StandinHub(root, renamed)
    thread = threading.Thread(target=server.serve_forever, name="standin-hub", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
