import csv, json, glob, collections, statistics as st, sys
# The interleaved rounds of a call, per cell: median ms of the first build, the others'
# change against it, cuDNN's median and ratios (per round too).
# usage: table.py 'glob of PREFIX_BUILD_ROUND.csv' 'glob of peers_ROUND.jsonl' BUILD,BUILD,...
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1]):
    b = f.rsplit('/',1)[-1].split('_',1)[1].rsplit('_',1)[0]   # prefix_BUILD_round.csv
    r = f.rsplit('_',1)[1].split('.')[0]
    for row in csv.DictReader(open(f)):
        if row['status'] != 'ok': continue
        k = (row['dtype'], int(row['dim']), int(row['seq']), int(row['causal']))
        d[(k, b)].append((int(r), float(row['ms'])))
pe = collections.defaultdict(list)
for f in glob.glob(sys.argv[2]):
    r = int(f.rsplit('_',1)[1].split('.')[0])
    for l in open(f):
        try: j = json.loads(l)
        except: continue
        if 'ms' not in j: continue
        k = (j['dtype'], j['dim'], j['seq'], 1 if j['causal'] else 0)
        pe[(k, j['peer'])].append((r, j['ms']))
keys = sorted(set(k for k, b in d))
builds = sys.argv[3].split(',')
print('dtype dim seq c | ' + ' '.join('%8s' % b for b in builds) + ' |  cudnn | cudnn/b0 cudnn/' + builds[-1] + ' | per-round cudnn/b0 ; cudnn/last')
for k in keys:
    med = {b: st.median([m for r, m in d[(k, b)]]) for b in builds if d.get((k, b))}
    cu = dict(pe.get((k, 'torch-cudnn'), []))
    cum = st.median(cu.values()) if cu else float('nan')
    base = med[builds[0]]
    last = [b for b in builds if b in med][-1]
    cells = ' '.join(('%8.4f' % med[b] if b == builds[0] else '%+7.1f%%' % (100 * (med[b] / base - 1))) if b in med else '%8s' % '-' for b in builds)
    rr = lambda b: ' '.join('%.3f' % (cu[r] / m) for r, m in sorted(d[(k, b)]) if r in cu)
    print('%4s %3d %5d %d | %s | %.4f | %.3f %.3f | %s ; %s' % (*k, cells, cum, cum / base, cum / med[last], rr(builds[0]), rr(last)))
