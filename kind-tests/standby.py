"""The node tier's standby reconciler: reads Deployment liqo-reconciler (JSON, stdin) and writes
a second Deployment, liqo-reconciler-standby, of the same pod on other host ports (the pods use
the node's network), selected apart from the first by label liqo.io/role: standby."""
import json
import sys

d = json.load(sys.stdin)
meta = d["metadata"]
d["metadata"] = {"name": "liqo-reconciler-standby", "namespace": meta["namespace"], "labels": meta.get("labels", {})}
d.pop("status", None)
spec = d["spec"]
spec["replicas"] = 1
spec["selector"]["matchLabels"]["liqo.io/role"] = "standby"
template = spec["template"]
template["metadata"].setdefault("labels", {})["liqo.io/role"] = "standby"
template["metadata"].get("annotations", {}).pop("kubectl.kubernetes.io/restartedAt", None)
container = template["spec"]["containers"][0]
env = [e for e in container.get("env", []) if e["name"] not in ("AUTH_LISTEN", "OPS_LISTEN")]
env += [{"name": "AUTH_LISTEN", "value": "0.0.0.0:8444"}, {"name": "OPS_LISTEN", "value": "0.0.0.0:8081"}]
container["env"] = env
for port in container.get("ports", []):
    port["containerPort"] = {"auth": 8444, "ops": 8081}.get(port["name"], port["containerPort"])
    port.pop("hostPort", None)
json.dump(d, sys.stdout)
