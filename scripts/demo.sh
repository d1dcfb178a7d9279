#!/usr/bin/env bash
# demo.sh - build bellows and watch bellowsd steer a training job.
#
#   scripts/demo.sh         a real job: two PyTorch ranks train a small CNN
#                           on Fashion-MNIST (CPU, gloo) under Accordion
#   scripts/demo.sh --sim   a simulated job (`bellows sim`), no PyTorch
#   scripts/demo.sh --with comet|slimgc|perfmodel|gcomp|resireduce
#                           the real job under another policy (its example
#                           file in examples/policies/, and the trainer's
#                           matching options)
#   scripts/demo.sh ... --out DIR
#                           where the log and the history go (default the
#                           build directory)
#   scripts/demo.sh ... --link RATE
#                           the same on a slower link: bellowsd, the job
#                           and the tools in a network namespace whose
#                           loopback sends at most RATE (100mbit, 1gbit;
#                           a tc token bucket); root only, else plain
#                           loopback with a note
#
# Installs what is missing (scripts/setup.sh full: PyTorch and the
# Fashion-MNIST data among it), builds, and starts bellowsd on loopback.
# The default runs examples/pytorch/fashion_mnist.py --nproc 2 for 4
# epochs (about a minute on two cores) with
# examples/pytorch/accordion_demo.yaml: rank 0 prints the test accuracy and
# the PowerSGD rank of every layer per window, and at the end the floats
# sent against uncompressed; then the history bellowsd recorded is
# summarised when this build has `bellows history`. On a terminal, the
# dashboard (`bellows top`) shows the job while it runs and closes 10 s
# after it ends (q leaves earlier; the job's output is printed afterwards);
# otherwise one screen of it, taken while the job runs, is printed.
# BELLOWS_DEMO_NO_TOP=1 keeps the job's output on the terminal instead. --sim runs
# examples/policies/demo.yaml instead: four simulated ranks of an
# eight-layer model report 30 windows of statistics, and the sim prints
# each decision bellowsd sends back. bellowsd is stopped with SIGTERM at the
# end, and on any exit. Its log goes to <out>/demo-bellowsd.log, its
# history to a file of this demo's own, <out>/demo-MODE-POLICY-TIME.db
# (earlier demos' files are kept, so `bellows history compare` can set two
# demos side by side), and <out>/demo-history.db links to the latest.
# Every mode ends with a summary
# in plain words read back from that history (scripts/demo_summary.py):
# what the policy decided and when, what it saved (sent against raw) and,
# where it chose not to compress, why, in its own measurements.
#
# Environment: BELLOWS_BUILD_DIR (default build), as in scripts/test.sh;
# BELLOWS_DEMO_OUT, BELLOWS_DEMO_NO_SETUP, BELLOWS_DEMO_EPOCHS, BELLOWS_DEMO_TRAIN_LIMIT,
# BELLOWS_DEMO_SIM_WINDOWS and BELLOWS_DEMO_CHECK_ARGS for the tests
# (below).
set -euo pipefail

mode=torch
with=accordion
with_given=
link=
policies="accordion|comet|slimgc|perfmodel|gcomp|resireduce"
# usage [STATUS]: the synopsis, on stdout for --help (status 0), else on
# stderr with status 2.
usage()
{
	local rc=${1:-2}
	{
		echo "usage: $0 [--sim | --with $policies]" \
		    "[--link RATE] [--out DIR]"
		echo "  --sim         a simulated job (bellows sim), no PyTorch"
		echo "  --with NAME   the PyTorch job under that policy's example"
		echo "  --link RATE   a token-bucket rate as tc writes it, e.g." \
		    "100mbit, 1gbit, 500kbit (root)"
		echo "  --out DIR     where the log and the history go (default" \
		    "the build directory); earlier histories are kept"
	} >&"$((rc == 0 ? 1 : 2))"
	exit "$rc"
}
# RATE in bits per second, or nothing when it is no rate tc takes in
# the units this script offers (bit, kbit, mbit, gbit).
link_bps()
{
	local v=${1,,}
	if [[ $v =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit)$ ]]; then
		awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN {
			m = u == "bit" ? 1 : u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : 1e9
			if (n * m >= 8000) printf "%.0f\n", n * m }'
	fi
}
while [ $# -gt 0 ]; do
	case "$1" in
	--sim) mode=sim ;;
	--with)
		case "${2:-}" in
		accordion | comet | slimgc | perfmodel | gcomp | resireduce)
			with=$2
			with_given=1
			;;
		"")
			echo "demo: --with needs a policy: accordion, comet," \
			    "slimgc, perfmodel, gcomp or resireduce" >&2
			usage
			;;
		*)
			echo "demo: --with: unknown policy '$2' (accordion," \
			    "comet, slimgc, perfmodel, gcomp or resireduce)" >&2
			usage
			;;
		esac
		shift
		;;
	--with=*) set -- --with "${1#--with=}" "${@:2}"; continue ;;
	--link)
		if [ -z "${2:-}" ]; then
			echo "demo: --link needs a rate, e.g. 100mbit" >&2
			usage
		fi
		if [ -z "$(link_bps "$2")" ]; then
			echo "demo: --link: '$2' is not a rate (a number with" \
			    "bit, kbit, mbit or gbit, at least 8kbit; e.g." \
			    "100mbit, 1gbit)" >&2
			exit 2
		fi
		link=${2,,}
		shift
		;;
	--link=*) set -- --link "${1#--link=}" "${@:2}"; continue ;;
	--out)
		if [ -z "${2:-}" ]; then
			echo "demo: --out needs a directory" >&2
			usage
		fi
		out_arg=$2
		shift
		;;
	--out=*) set -- --out "${1#--out=}" "${@:2}"; continue ;;
	-h | --help) usage 0 ;;
	*)
		echo "demo: unknown option '$1'" >&2
		usage
		;;
	esac
	shift
done
if [ "$mode" = sim ] && [ "$with" = resireduce ]; then
	echo "demo: --sim --with resireduce: the simulated ranks report no" \
	    "residual statistics; run it without --sim (the PyTorch job)" >&2
	exit 2
fi
# BELLOWS_DEMO_CHECK_ARGS=1: stop once the command line is read (tests).
if [ -n "${BELLOWS_DEMO_CHECK_ARGS:-}" ]; then
	shown=default
	[ -z "$with_given" ] || shown=$with
	echo "demo: mode $mode, policy $shown, link ${link:-loopback}${out_arg:+, out $out_arg}"
	exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

builddir=${BELLOWS_BUILD_DIR:-build}
# --out, else BELLOWS_DEMO_OUT: where the log and history go (default the
# build dir).
out_dir=${out_arg:-${BELLOWS_DEMO_OUT:-$builddir}}
# BELLOWS_DEMO_NO_SETUP=1 (the tests): use the build as it is.
if [ -z "${BELLOWS_DEMO_NO_SETUP:-}" ]; then
	bash scripts/setup.sh full
	if [ ! -f "$builddir/meson-private/coredata.dat" ]; then
		meson setup "$builddir" --buildtype=debugoptimized
	fi
	meson compile -C "$builddir"
fi
# A shorter job (the tests): BELLOWS_DEMO_EPOCHS (default 4) and
# BELLOWS_DEMO_TRAIN_LIMIT (images per rank, default all) for the PyTorch
# job, BELLOWS_DEMO_SIM_WINDOWS (default 30) for --sim.
epochs=${BELLOWS_DEMO_EPOCHS:-4}
train_limit=()
if [ -n "${BELLOWS_DEMO_TRAIN_LIMIT:-}" ]; then
	train_limit=(--train-limit "$BELLOWS_DEMO_TRAIN_LIMIT")
fi
sim_windows=${BELLOWS_DEMO_SIM_WINDOWS:-30}

bellowsd=$builddir/controller/bellowsd
bellows=$builddir/tools/bellows
# The trainer's options for each policy (--with): COMET compresses the
# convolutions' saved inputs at bellowsd's bounds; SlimGC's threshold
# chooses which tensors go 2-bit; perfmodel gates PowerSGD.
trainer_args=()
sim_args=()
if [ "$mode" = sim ] && [ -z "$with_given" ]; then
	policy=examples/policies/demo.yaml
else
	case "$with" in
	accordion) policy=examples/pytorch/accordion_demo.yaml ;;
	comet)
		policy=examples/policies/comet.yaml
		trainer_args=(--comet)
		;;
	slimgc)
		policy=examples/policies/slimgc.yaml
		trainer_args=(--compressor 2bit --quant-threshold 0.15)
		;;
	perfmodel) policy=examples/policies/perfmodel.yaml ;;
	gcomp)
		policy=examples/policies/gcomp.yaml
		trainer_args=(--compressor gcomp)
		;;
	resireduce)
		policy=examples/policies/resireduce.yaml
		trainer_args=(--model resnet --compressor topk)
		;;
	esac
fi
# The trainer's first window sends every gradient raw, whatever bellowsd
# decides: the run's own raw step time, which the summary compares the
# compressed windows with (same run, same machine, same link).
if [ "$mode" != sim ]; then
	trainer_args+=(--raw-windows 1)
fi
# --sim --with POLICY: the simulated ranks also report what the policy
# measures (tools/sim.c): per-tensor and bucket send times of a modelled
# ring all-reduce at the link's rate (10 Gbit/s, or --link's), codec,
# backward and activation statistics, memory.
if [ "$mode" = sim ] && [ -n "$with_given" ]; then
	gbps=10
	if [ -n "$link" ]; then
		gbps=$(awk -v b="$(link_bps "$link")" 'BEGIN { printf "%g", b / 1e9 }')
	fi
	# shellcheck disable=SC2054 # the commas are the options' own
	sim_args=(--comm-model "0.01,$gbps,32,0.13" --buckets 2
		--backward-ms 5 --act 1e-3,0.5,8 --mem 16000,2000)
	# GComp's tables are built from the exponent histograms.
	if [ "$with" = gcomp ]; then
		sim_args+=(--exp-hist)
	fi
	# The simulated layers are 2-D and its runs short: COMET's example
	# file, with 2-D layers and 40-step updates.
	if [ "$with" = comet ]; then
		mkdir -p "$out_dir"
		sed -e 's/min_ndim: 4 .*/min_ndim: 2/' \
		    -e 's/min_interval_steps: 125 .*/min_interval_steps: 10/' \
		    -e 's/  interval_steps: 1000 .*/  interval_steps: 40/' \
		    "$policy" >"$out_dir/demo-comet-sim.yaml"
		policy=$out_dir/demo-comet-sim.yaml
	fi
fi
# --link RATE: everything that talks over loopback (bellowsd, the job,
# the tools) runs in a network namespace of its own whose loopback sends
# at most RATE, through a token bucket (as bench/slimgc measures). Root
# only; otherwise the demo says so and runs on plain loopback.
ns=
in_ns=()
if [ -n "$link" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "demo: --link $link needs root (a network namespace with a" \
		    "token-bucket qdisc); running on plain loopback instead"
		link=
	elif ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
		echo "demo: --link $link needs ip and tc (apt-get install" \
		    "iproute2); running on plain loopback instead"
		link=
	else
		ns=bellows-demo-$$
		# tbf's bucket must hold a timer tick's worth at the rate.
		burst=256kb
		if [ "$(link_bps "$link")" -ge 500000000 ]; then
			burst=2mb
		fi
		if ! ip netns add "$ns" ||
			! ip netns exec "$ns" ip link set lo up mtu 9000 ||
			! ip netns exec "$ns" tc qdisc add dev lo root tbf \
			    rate "$link" burst "$burst" latency 100ms; then
			ip netns del "$ns" 2>/dev/null || true
			echo "demo: could not set up a $link network namespace;" \
			    "running on plain loopback instead"
			ns=
			link=
		else
			in_ns=(ip netns exec "$ns")
			echo "demo: the job runs in network namespace $ns, its" \
			    "loopback limited to $link (tc qdisc tbf)"
		fi
	fi
fi

daemon_log=$out_dir/demo-bellowsd.log
mkdir -p "$out_dir"
# A history file of this demo's own; demo-history.db names the latest.
# The previous demo's file, if any, is what the summary offers to
# compare with.
previous_db=
if [ -L "$out_dir/demo-history.db" ] && [ -f "$out_dir/demo-history.db" ]; then
	previous_db=$out_dir/$(readlink "$out_dir/demo-history.db")
fi
shown_with=$with
[ "$mode" != sim ] || [ -n "$with_given" ] || shown_with=schedule
history_db=$out_dir/demo-$mode-$shown_with-$(date +%Y%m%d-%H%M%S).db
n=1
while [ -e "$history_db" ]; do
	n=$((n + 1))
	history_db=$out_dir/demo-$mode-$shown_with-$(date +%Y%m%d-%H%M%S)-$n.db
done
# An older demo's plain file (no link) is kept under a name of its own.
if [ -f "$out_dir/demo-history.db" ] && [ ! -L "$out_dir/demo-history.db" ]; then
	mv "$out_dir/demo-history.db" "$out_dir/demo-earlier-$(date +%Y%m%d-%H%M%S).db"
	rm -f "$out_dir/demo-history.db-wal" "$out_dir/demo-history.db-shm"
fi
ln -sfn "$(basename "$history_db")" "$out_dir/demo-history.db"

# Whether `bellows help` lists COMMAND (history and top are newer than the
# rest of the tool).
has_command()
{
	"$bellows" help 2>&1 | awk '{ print $1 }' | grep -qx "$1"
}

# Two free loopback ports: 5555/5556 when both are free, else two the
# kernel picks. SO_REUSEADDR as ZeroMQ sets it, so a port in TIME_WAIT
# counts as free.
read -r ctl_port pub_port < <("${in_ns[@]}" python3 - <<'EOF'
import socket

def grab(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s

held = [grab(5555), grab(5556)]
if None in held:
    for s in held:
        if s is not None:
            s.close()
    held = [grab(0), grab(0)]
print(*(s.getsockname()[1] for s in held))
for s in held:
    s.close()
EOF
) || { echo "demo: found no free loopback ports" >&2; exit 1; }
control=tcp://127.0.0.1:$ctl_port
publish=tcp://127.0.0.1:$pub_port

daemon_pid=
stop_daemon()
{
	if [ -z "$daemon_pid" ]; then
		return 0
	fi
	local rc=0
	if kill -0 "$daemon_pid" 2>/dev/null; then
		kill -TERM "$daemon_pid" 2>/dev/null || true
		# Give it 5 s to flush its history, then stop waiting politely.
		for _ in $(seq 50); do
			kill -0 "$daemon_pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$daemon_pid" 2>/dev/null; then
			echo "demo: bellowsd ignored SIGTERM, killing it" >&2
			kill -KILL "$daemon_pid" 2>/dev/null || true
		fi
	fi
	wait "$daemon_pid" 2>/dev/null || rc=$?
	daemon_pid=
	return "$rc"
}
sim_pid=
cleanup()
{
	if [ -n "$sim_pid" ]; then
		kill -TERM "$sim_pid" 2>/dev/null || true
		wait "$sim_pid" 2>/dev/null || true
	fi
	stop_daemon || true
	if [ -n "$ns" ]; then
		ip netns del "$ns" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "demo: starting bellowsd (control $control, publish $publish)"
"${in_ns[@]}" "$bellowsd" --control "$control" --publish "$publish" \
	--policy "$policy" --db "$history_db" >"$daemon_log" 2>&1 &
daemon_pid=$!

# Wait up to 5 s for it to answer: `bellows status` when the tool is
# there, otherwise a plain TCP connect to the control port.
answers()
{
	if [ -x "$bellows" ]; then
		timeout 1 "${in_ns[@]}" "$bellows" status --control "$control" \
		    >/dev/null 2>&1
	else
		"${in_ns[@]}" python3 -c 'import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5).close()' \
		    "$ctl_port" 2>/dev/null
	fi
}
ready=0
deadline=$((SECONDS + 5))
while [ "$SECONDS" -lt "$deadline" ]; do
	if ! kill -0 "$daemon_pid" 2>/dev/null; then
		break
	fi
	if answers; then
		ready=1
		break
	fi
	sleep 0.1
done
if [ "$ready" -ne 1 ]; then
	echo "demo: bellowsd did not come up; its log ($daemon_log):" >&2
	cat "$daemon_log" >&2 || true
	exit 1
fi

# The dashboard is shown on the running job when this script talks to a
# terminal (the job's own output then goes to a file, shown afterwards);
# otherwise one screen of it is captured while the job runs.
if [ "$mode" = sim ]; then
	job=demo
else
	job=fashion-mnist
fi
live_top=0
if has_command top && [ -t 0 ] && [ -t 1 ] && [ -z "${BELLOWS_DEMO_NO_TOP:-}" ]; then
	live_top=1
fi
job_log=$out_dir/demo-job.log

# In the background so that a signal to this script is handled at once
# (bash runs traps only between foreground commands).
run_job()
{
	if [ "$mode" = sim ]; then
		"${in_ns[@]}" "$bellows" sim --control "$control" --publish "$publish" \
			--job "$job" --ranks 4 --layers 8 --windows "$sim_windows" \
			--steps-per-window 20 --step-ms 10 "${sim_args[@]}"
	else
		# The trainer loads the libbellows of this build.
		"${in_ns[@]}" env BELLOWS_LIB="$builddir/agent/libbellows.so" \
			/usr/bin/python3 examples/pytorch/fashion_mnist.py \
			--nproc 2 --job "$job" --epochs "$epochs" \
			"${train_limit[@]}" --control "$control" \
			--publish "$publish" "${trainer_args[@]}"
	fi
}
top_args=(--control "$control" --publish "$publish" --db "$history_db"
	--job "$job")
if [ "$live_top" -eq 1 ]; then
	exec 3</dev/tty
	run_job </dev/null >"$job_log" 2>&1 &
	sim_pid=$!
	echo "demo: the job runs; bellows top shows it (q leaves; it closes" \
	    "by itself 10 s after the job ends)"
	sleep 1
	"${in_ns[@]}" "$bellows" top "${top_args[@]}" <&3 &
	top_pid=$!
	# Close the dashboard 10 s after the job ends, unless q came first.
	(
		while kill -0 "$sim_pid" 2>/dev/null; do sleep 0.5; done
		for _ in $(seq 20); do
			kill -0 "$top_pid" 2>/dev/null || exit 0
			sleep 0.5
		done
		kill -TERM "$top_pid" 2>/dev/null || true
	) &
	watcher_pid=$!
	wait "$top_pid" || true
	exec 3<&-
	kill "$watcher_pid" 2>/dev/null || true
	wait "$watcher_pid" 2>/dev/null || true
	if kill -0 "$sim_pid" 2>/dev/null; then
		echo "demo: the dashboard was left; the job goes on to its end"
	fi
	sim_rc=0
	wait "$sim_pid" || sim_rc=$?
	sim_pid=
	echo "demo: the job's output ($job_log):"
	cat "$job_log"
else
	run_job &
	sim_pid=$!
	captured=0
	if has_command top; then
		# One screen of the dashboard on the live job, once a few
		# windows have closed (or when the job is about to end).
		for _ in $(seq 600); do
			kill -0 "$sim_pid" 2>/dev/null || break
			if "${in_ns[@]}" "$bellows" status --control "$control" --job "$job" \
				--format json 2>/dev/null | python3 -c '
import json, sys
jobs = json.load(sys.stdin).get("jobs", [])
sys.exit(0 if jobs and jobs[0].get("window", 0) >= 3 else 1)' 2>/dev/null; then
				echo "\$ $bellows top --control $control --publish $publish --db $history_db --job $job --once (while the job runs)"
				"${in_ns[@]}" "$bellows" top "${top_args[@]}" --once --size 24x100 ||
					echo "demo: bellows top failed" >&2
				captured=1
				break
			fi
			sleep 0.5
		done
	fi
	sim_rc=0
	wait "$sim_pid" || sim_rc=$?
	sim_pid=
fi

daemon_rc=0
stop_daemon || daemon_rc=$?
if [ "$daemon_rc" -ne 0 ]; then
	echo "demo: bellowsd exited with status $daemon_rc; its log ($daemon_log):" >&2
	cat "$daemon_log" >&2 || true
fi
if [ "$sim_rc" -ne 0 ]; then
	if [ "$mode" = sim ]; then
		echo "demo: bellows sim failed with status $sim_rc" >&2
	else
		echo "demo: the trainer failed with status $sim_rc" >&2
	fi
	exit "$sim_rc"
fi
[ "$daemon_rc" -eq 0 ] || exit 1
if has_command history; then
	echo "demo: the history bellowsd recorded ($history_db):"
	for what in runs layers "decisions --changed"; do
		echo "\$ $bellows history $what --db $history_db"
		# shellcheck disable=SC2086 # "decisions --changed": two words
		"$bellows" history $what --db "$history_db" ||
			echo "demo: bellows history $what failed" >&2
	done
else
	echo "demo: (this build has no \`bellows history\`; the history" \
	    "summary is skipped)"
fi
if has_command top && [ "$live_top" -eq 0 ] && [ "$captured" -eq 0 ]; then
	# The job ended before a live screen could be taken: the dashboard
	# over what was recorded instead, as `bellows top --db` shows it.
	echo "\$ $bellows top --db $history_db --once"
	"$bellows" top --db "$history_db" --once --size 24x100 ||
		echo "demo: bellows top failed" >&2
fi
# What the policy decided, saved and why, in plain words, read back from
# the history (scripts/demo_summary.py).
summary_args=(--db "$history_db" --bellows "$bellows")
if [ -n "$link" ]; then
	summary_args+=(--link "$link")
fi
if [ -n "$previous_db" ] && [ -f "$previous_db" ]; then
	summary_args+=(--compare-db "$previous_db")
fi
echo
python3 scripts/demo_summary.py "${summary_args[@]}" ||
	echo "demo: the summary failed" >&2
echo "demo: done; bellowsd's log is in $daemon_log"
