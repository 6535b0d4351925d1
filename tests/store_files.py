"""What a store holds, read the same way for a directory and for an s3:// store (its objects listed
with a request curl signs itself, not the client under test): for tests that look at the store's
files — the space gc returns, the packs it writes."""
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest


def is_remote(store):
    return str(store).startswith("s3://")


def curl(*args, data=None):
    """An S3 request signed by curl (the same SigV4 as the client, not the client's code)."""
    argv = ["curl", "-sS", "-f", "--aws-sigv4", f"aws:amz:{os.environ['AWS_REGION']}:s3",
            "--user", f"{os.environ['AWS_ACCESS_KEY_ID']}:{os.environ['AWS_SECRET_ACCESS_KEY']}",
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *args]
    return subprocess.run(argv, input=data, capture_output=True, check=True).stdout


def objects(store, under=""):
    """{key below the store's prefix: size} of the objects of an s3:// store (under: a subdirectory)."""
    bucket, _, prefix = str(store)[len("s3://"):].partition("/")
    listed, token = {}, None
    while True:
        query = f"list-type=2&prefix={quote(prefix + '/' + (under + '/' if under else ''), safe='')}"
        if token:
            query += f"&continuation-token={quote(token, safe='')}"
        text = curl(f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}?{query}").decode()
        for key, size in re.findall(r"<Key>([^<]*)</Key>.*?<Size>(\d+)</Size>", text, re.S):
            listed[key[len(prefix) + 1:]] = int(size)
        found = re.search(r"<NextContinuationToken>([^<]*)</NextContinuationToken>", text)
        if "<IsTruncated>true</IsTruncated>" not in text or not found:
            return listed
        token = found.group(1)


def store_bytes(store):
    """The space a store takes: du of a directory, the objects' bytes in an object store."""
    if is_remote(store):
        return sum(objects(store).values())
    return int(subprocess.run(["du", "-s", "--block-size=1", str(store)], capture_output=True,
                              check=True).stdout.split()[0])


def store_entries(store, directory):
    """The names in one of the store's directories (packs, segments, recovery), sorted."""
    if is_remote(store):
        return sorted(key.split("/", 1)[1] for key in objects(store, directory) if "/" not in key.split("/", 1)[1])
    path = Path(store) / directory
    return sorted(os.listdir(path)) if path.is_dir() else []


@pytest.fixture(autouse=True)
def piece_cache(tmp_path, monkeypatch):
    """Every test its own local cache of object-store pieces (docs/FORMAT.md §23), as a host of its own:
    what one test read never answers another's requests."""
    directory = tmp_path / "piece-cache"
    monkeypatch.setenv("GRAPHFS_CACHE_DIR", str(directory))
    return directory
