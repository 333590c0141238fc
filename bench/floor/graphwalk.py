"""Walk the SCons node graph that a build would traverse; count and dump it.

Used from SConscript context only (imports SCons). ``walk(roots)`` visits
every node reachable from ``roots`` through ``Node.children(scan=True)``,
which is exactly what the Taskmaster visits in a build: sources, explicit
``Depends`` and scanner-found implicit dependencies (C headers), minus
``Ignore``. Edges are the (parent, child) pairs of those lists.

The dump (JSON) records, per node: kind (File/Dir/Value/Alias/Entry),
path or name, whether it has a builder, its executor group (targets built
by one action call share it), its sources and its other children, so that
``SConstruct.floor`` can rebuild the same shape with no-op actions.
"""

import json

import SCons.Node
import SCons.Node.Alias
import SCons.Node.FS
import SCons.Node.Python
import SCons.Script


def kind(node) -> str:
    if isinstance(node, SCons.Node.Alias.Alias):
        return "Alias"
    if isinstance(node, SCons.Node.Python.Value):
        return "Value"
    if isinstance(node, SCons.Node.FS.File):
        return "File"
    if isinstance(node, SCons.Node.FS.Dir):
        return "Dir"
    return type(node).__name__


def roots():
    """Default targets plus every alias defined (aliases are graph nodes too,
    created while reading the SConscripts)."""
    r = list(SCons.Script.DEFAULT_TARGETS)
    r += list(SCons.Node.Alias.default_ans.values())
    return r


def walk(start):
    """Return (order, children) with every reachable node in DFS order."""
    seen = {}
    order = []
    children = {}
    stack = list(reversed(start))
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        order.append(n)
        kids = list(n.children(scan=True))
        children[id(n)] = kids
        for k in reversed(kids):
            if id(k) not in seen:
                stack.append(k)
    return order, children


def summary(order, children):
    kinds = {}
    built = 0
    executors = set()
    for n in order:
        kinds[kind(n)] = kinds.get(kind(n), 0) + 1
        if n.has_builder():
            built += 1
            executors.add(id(n.get_executor()))
    edges = sum(len(children[id(n)]) for n in order)
    return {"nodes": len(order), "edges": edges, "built_nodes": built,
            "actions": len(executors), "kinds": dict(sorted(kinds.items()))}


def dump(path, order, children):
    index = {id(n): i for i, n in enumerate(order)}
    nodes = []
    for n in order:
        k = kind(n)
        d = {"kind": k, "name": str(n) if k != "Value" else "value%d" % len(nodes)}
        if n.has_builder() and k != "Alias":
            ex = n.get_executor()
            d["exec"] = id(ex)
            srcs = [index[id(s)] for s in ex.get_all_sources() if id(s) in index]
            d["sources"] = srcs
            d["extra"] = [index[id(c)] for c in children[id(n)]
                          if index[id(c)] not in set(srcs)]
        else:
            d["children"] = [index[id(c)] for c in children[id(n)]]
        if k == "Value":
            d["size"] = len(n.get_text_contents())
        nodes.append(d)
    # executor ids -> small integers, in first-seen order (deterministic)
    ex_ids = {}
    ex_targets = []
    for n, d in zip(order, nodes):
        if "exec" in d:
            if d["exec"] not in ex_ids:
                ex_ids[d["exec"]] = len(ex_ids)
                ex_targets.append([str(t) for t in n.get_executor().get_all_targets()])
            d["exec"] = ex_ids[d["exec"]]
    out = {"summary": summary(order, children), "nodes": nodes,
           "executors": ex_targets,
           "defaults": [index[id(n)] for n in SCons.Script.DEFAULT_TARGETS],
           }
    with open(path, "w") as f:
        json.dump(out, f)
    return out["summary"]
