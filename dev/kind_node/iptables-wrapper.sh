#!/bin/sh
# kube-proxy's iptables for the offline kind node image: on first use, pick the backend
# (legacy or nft) whose tables already hold more rules in this network namespace (the node's:
# kube-proxy runs with hostNetwork), the same rule kind's node entrypoint uses to choose the
# node's own mode, then run the real tool through that backend's multi-call binary.
set -eu
cmd=$(basename "$0")
state=/run/desched-iptables-mode
mode=$(cat "$state" 2>/dev/null || true)
if [ -z "$mode" ]; then
  legacy=$( (xtables-legacy-multi iptables-save || true; xtables-legacy-multi ip6tables-save || true) 2>/dev/null | grep -c '^-' || true)
  nft=$( (xtables-nft-multi iptables-save || true; xtables-nft-multi ip6tables-save || true) 2>/dev/null | grep -c '^-' || true)
  if [ "${legacy:-0}" -gt "${nft:-0}" ]; then mode=legacy; else mode=nft; fi
  echo "$mode" > "$state" 2>/dev/null || true
fi
exec "/usr/sbin/xtables-${mode}-multi" "$cmd" "$@"
