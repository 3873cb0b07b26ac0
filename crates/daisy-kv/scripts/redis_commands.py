#!/usr/bin/env python3
"""Write crates/daisy-kv/src/admin/redis_commands.json: Redis 7.0's command table as data.

    mkdir json && for f in $(git -C REDIS ls-tree --name-only 7.0.15 src/commands/); do
        git -C REDIS show 7.0.15:$f > json/$(basename $f); done
    python3 redis_commands.py json > ../src/admin/redis_commands.json

Reads the command descriptions Redis generates its own table from (src/commands/*.json of
tag 7.0.15) and writes one JSON array, one command a line, sorted by full name (`container|sub`
for a subcommand): every command a Redis server (not a Sentinel: ONLY_SENTINEL commands are
left out) knows, with what COMMAND INFO, COMMAND DOCS and COMMAND GETKEYS report. Names are
normalized as Redis's own generator (utils/generate-command-code.py) does: command and
argument names lowercase, tokens uppercase, tips lowercase, a subcommand's group its
container's; flags and ACL categories lowercase and as declared (implicit categories are added
at run time, as Redis does). `admin::meta` reads the file (serde) the first time it is needed.
"""
import glob
import json
import os
import sys

GROUPS = {"sorted_set": "sorted-set"}


def arg(a):
    out = {"name": a["name"].lower(), "type": a["type"]}
    if "key_spec_index" in a:
        out["key_spec"] = a["key_spec_index"]
    if a.get("token"):
        out["token"] = a["token"].upper()
    if a.get("since"):
        out["since"] = a["since"]
    if a.get("deprecated_since"):
        out["deprecated_since"] = a["deprecated_since"]
    flags = (1 if a.get("optional") else 0) | (2 if a.get("multiple") else 0) | (
        4 if a.get("multiple_token") else 0)
    if flags:
        out["flags"] = flags
    if a["type"] in ("oneof", "block"):
        out["args"] = [arg(x) for x in a["arguments"]]
    return out


def key_spec(k):
    bs = k["begin_search"]
    if "index" in bs:
        b = {"index": bs["index"]["pos"]}
    elif "keyword" in bs:
        b = {"keyword": [bs["keyword"]["keyword"], bs["keyword"]["startfrom"]]}
    else:
        b = "unknown"
    fk = k["find_keys"]
    if "range" in fk:
        r = fk["range"]
        f = {"range": [r["lastkey"], r["step"], r["limit"]]}
    elif "keynum" in fk:
        r = fk["keynum"]
        f = {"keynum": [r["keynumidx"], r["firstkey"], r["step"]]}
    else:
        f = "unknown"
    out = {"flags": k.get("flags", []), "bs": b, "fk": f}
    if k.get("notes"):
        out["notes"] = k["notes"]
    return out


def main(src):
    cmds = {}
    for path in sorted(glob.glob(os.path.join(src, "*.json"))):
        with open(path) as f:
            for name, d in json.load(f).items():
                if "ONLY_SENTINEL" in d.get("command_flags", []):
                    continue
                full = name.lower()
                if d.get("container"):
                    full = d["container"].lower() + "|" + full
                cmds[full] = d
    rows = []
    for full in sorted(cmds):
        d = cmds[full]
        group = cmds[full.split("|")[0]]["group"]
        c = {"name": full, "arity": d["arity"], "group": GROUPS.get(group, group),
             "since": d.get("since", ""), "summary": d.get("summary", "")}
        if d.get("complexity"):
            c["complexity"] = d["complexity"]
        for key, field, low in [("flags", "command_flags", True), ("acl", "acl_categories", True),
                                ("tips", "command_tips", True), ("doc_flags", "doc_flags", True)]:
            if d.get(field):
                c[key] = [x.lower() for x in d[field]]
        for key in ("deprecated_since", "replaced_by"):
            if d.get(key):
                c[key] = d[key]
        if d.get("get_keys_function"):
            c["getkeys"] = True
        if d.get("history"):
            c["history"] = d["history"]
        if d.get("key_specs"):
            c["key_specs"] = [key_spec(k) for k in d["key_specs"]]
        if d.get("arguments"):
            c["args"] = [arg(a) for a in d["arguments"]]
        rows.append(json.dumps(c, ensure_ascii=False, separators=(",", ":")))
    print("[\n" + ",\n".join(rows) + "\n]")


if __name__ == "__main__":
    main(sys.argv[1])
