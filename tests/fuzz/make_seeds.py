"""Writes the seed corpora of fuzz_block, fuzz_sidecar, fuzz_envelope and fuzz_s3_answer from
a real store, so that the fuzzers start from inputs that reach deep into each decoder.

    GRAPHFS=build/tools/graphfs /usr/bin/python3 tests/fuzz/make_seeds.py

Builds a small store with tools/demo/make-demo-store (node and edge tables, a branch, merges,
a schema change), then writes into tests/fuzz/corpus/:
  block/      each manifest block as on disk (selector 0), as a stored payload to checksum
              (selector 1), the file header (2), each plain node payload (3), root records (4),
              leaf values as branch records and head rows (5, 7), commit records (6)
  sidecar/    a sidecar file with two segments, as on disk and as a payload (docs/FORMAT.md §17)
  envelope/   `graphfs dump` of the demo store, a few lines per file, plus hand-written lines
              jansson's reader takes
  s3_answer/  ListObjectsV2 pages and error documents as radosgw writes them
Seeds are named by content (the first 16 hex digits of their SHA-256), so running it again adds
nothing twice. Needs the `zstd` command to unpack compressed blocks.
"""
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
MANIFEST_BLOCKS_START = 12288


def write_seed(directory, data):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / hashlib.sha256(data).hexdigest()[:16]).write_bytes(data)


def blocks(data):
    offset = MANIFEST_BLOCKS_START
    while offset + 24 <= len(data) and data[offset:offset + 4] == b"GFSB":
        kind, codec = data[offset + 4], data[offset + 5]
        stored, raw = struct.unpack_from("<II", data, offset + 8)
        yield kind, codec, raw, data[offset:offset + 24 + stored], data[offset + 24:offset + 24 + stored]
        offset += 24 + stored


def unpack(codec, raw_size, payload):
    if codec == 0:
        return payload
    if codec == 1:
        return subprocess.run(["zstd", "-d", "-c", "-q"], input=payload, capture_output=True, check=True).stdout
    return None


def leaf_values(payload):
    """The values of a plain leaf node (FORMAT.md §5): [u16 key size, key, u16 value size, value]..."""
    if len(payload) < 4 or payload[0] != 0 or payload[1] != 0:
        return []
    (count,) = struct.unpack_from("<H", payload, 2)
    at, values = 4, []
    for _ in range(count):
        (key_size,) = struct.unpack_from("<H", payload, at)
        at += 2 + key_size
        (value_size,) = struct.unpack_from("<H", payload, at)
        values.append(payload[at + 2:at + 2 + value_size])
        at += 2 + value_size
    return values


def block_seeds(store):
    data = (store / "manifest").read_bytes()
    directory = CORPUS / "block"
    write_seed(directory, b"\x02" + data[:4096])
    per_kind = {}
    for kind, codec, raw_size, block, stored in blocks(data):
        per_kind[kind] = per_kind.get(kind, 0) + 1
        if per_kind[kind] > 6:
            continue
        write_seed(directory, b"\x00" + block)
        write_seed(directory, b"\x01" + bytes([kind, codec]) + struct.pack("<I", raw_size) + stored)
        payload = unpack(codec, raw_size, stored)
        if payload is None:
            continue
        if kind == 2:
            write_seed(directory, b"\x03" + payload)
            for value in leaf_values(payload)[:4]:
                write_seed(directory, b"\x05" + value)
                write_seed(directory, b"\x07" + value)
        elif kind == 1:
            write_seed(directory, b"\x04" + payload)
        elif kind == 3:
            write_seed(directory, b"\x06" + payload)


def sidecar_seeds():
    payload = bytes(range(16)) + struct.pack("<QII", 41, 4242, 2) + struct.pack("<QQ", 7, 9)
    header = struct.pack("<II", 0x52534647, 1)
    block = bytearray(struct.pack("<4sBBHII", b"GFSB", 8, 0, 0, len(payload), len(payload)))
    # the checksum is left zero: the "as on disk" seed is refused, its payload twin is not
    block += b"\0" * 8 + payload
    write_seed(CORPUS / "sidecar", b"\x00" + header + bytes(block))
    write_seed(CORPUS / "sidecar", b"\x01" + payload)
    write_seed(CORPUS / "sidecar", b"\x03" + payload)
    write_seed(CORPUS / "sidecar", b"\x01" + payload[:32 - 4] + struct.pack("<I", 0))


def envelope_seeds(graphfs, store):
    dump = subprocess.run([graphfs, "dump", str(store)], capture_output=True, check=True).stdout.splitlines()
    directory = CORPUS / "envelope"
    for start in range(0, min(len(dump), 40), 4):
        write_seed(directory, b"\n".join(dump[start:start + 4]) + b"\n")
    for line in (b'{"type":"Person","data":{"id":"a","name":"A \\u00e9"}}',
                 b'{ "data": {"id":"a"}, "type": "Person" }',
                 b'{"edge":"KNOWS","to":"b","from":"a","data":{"id":"k1","since":2001}}',
                 b'{"schema":"Person","data":{"properties":{"name":{"type":"string"}}}}',
                 b'{"type":"P\\u0000Q","data":{"id":"a"}}',
                 b'{"edge":"E","from":"a","to":"b","data":{"from":"c"}}',
                 b'\t \r'):
        write_seed(directory, line + b"\n")


def s3_seeds():
    directory = CORPUS / "s3_answer"
    listing = (b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
               b'<Name>graphfs</Name><Prefix>graphfs/store/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys>'
               b'<IsTruncated>%s</IsTruncated>%s'
               b'<Contents><Key>graphfs/store/manifest/00000000000000000001</Key><LastModified>2026-12-05T08:00:00.000Z</LastModified>'
               b'<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>4096</Size><StorageClass>STANDARD</StorageClass></Contents>'
               b'<Contents><Key>graphfs/store/segments/a&amp;b</Key><Size>18446744073709551615</Size></Contents>'
               b'</ListBucketResult>')
    write_seed(directory, b"\x02" + listing % (b"false", b""))
    write_seed(directory, b"\x02" + listing % (b"true", b"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"))
    write_seed(directory, b"\x00" + listing % (b"false", b""))
    write_seed(directory, b"\x01" + b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code>'
               b'<Message>The specified key does not exist.</Message><BucketName>graphfs</BucketName>'
               b'<RequestId>tx00000-0</RequestId><HostId>1-default</HostId></Error>')
    write_seed(directory, b"\x00" + b'<InitiateMultipartUploadResult><Bucket>graphfs</Bucket><Key>k</Key>'
               b'<UploadId>2~iCw_lDY8VoAbeCANGlvVsS2ZRXPB9k-</UploadId></InitiateMultipartUploadResult>')


def main():
    graphfs = os.environ.get("GRAPHFS", str(ROOT / "build" / "tools" / "graphfs"))
    with tempfile.TemporaryDirectory() as work:
        store = Path(work) / "store"
        subprocess.run([ROOT / "tools" / "demo" / "make-demo-store", store], check=True, capture_output=True,
                       env=dict(os.environ, GRAPHFS=graphfs))
        block_seeds(store)
        envelope_seeds(graphfs, store)
    sidecar_seeds()
    s3_seeds()
    for name in ("block", "sidecar", "envelope", "s3_answer"):
        print(f"{name}: {len(list((CORPUS / name).iterdir()))} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
