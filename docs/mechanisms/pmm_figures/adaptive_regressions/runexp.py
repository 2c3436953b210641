"""Side-by-side runs for the adaptive-marginal regression study (docs/mechanisms/pmm.md, "The regressions at
depths 5 and 6"): `dpsynth synth` then `dpsynth eval` per table, epsilon, seed and variant, one CSV row each.

    TABLES=DIR BIN=target/release/dpsynth python3 runexp.py OUT.csv LABEL:ENV=V,ARGS=--flag+value ... \
        -- TABLE:EPS,... SEEDS

DIR holds TABLE.parquet and TABLE.toml; a table whose name starts with `flights` is run on its four numeric
columns, any other on x0..x3. A variant sets environment variables (the measurement switches of the patches
beside this file) and/or extra synth flags (ARGS, '+'-separated). Rows add the 1-D TV on 64 cells, the d = 1
rule's depth (printed by the patched build) and the adaptive cells per column to accuracy_ablation.py's scores.
"""
import json, os, subprocess, sys, time, csv, statistics, itertools
# usage: runexp.py OUT.csv "label:ENV=V,ENV=V" ... -- tables(t:eps,...) seeds
B = os.environ.get('BIN', 'target/release/dpsynth')
D = os.environ.get('TABLES', '/tmp/a76/data')
out = sys.argv[1]
sep = sys.argv.index('--')
variants = sys.argv[2:sep]
specs = sys.argv[sep+1].split(',')
seeds = [int(x) for x in sys.argv[sep+2].split(',')]
new = not os.path.exists(out)
fh = open(out, 'a', newline='')
fields = ['build','table','columns','d','epsilon','seed','variant','seconds','subsample_w1','ratio_to_floor','pairwise_w1','max_1d_w1','tv_2way','mean_error','correlation_error','rank_correlation_error','tv_1d_mean','tv_1d_max','fixed_depth','cells']
w = csv.DictWriter(fh, fieldnames=fields)
if new: w.writeheader()
tmp = f'/tmp/a76/tmp{os.getpid()}'
os.makedirs(tmp, exist_ok=True)
for spec in specs:
    t, e = spec.split(':')
    cols = 'dep_delay,arr_delay,air_time,distance' if t.startswith('flights') else 'x0,x1,x2,x3'
    for seed in seeds:
        for v in variants:
            label, _, envs = v.partition(':')
            env = dict(os.environ)
            env['DPS_DEBUG'] = '1'
            extra = []
            for kv in filter(None, envs.split(',')):
                k, val = kv.split('=', 1)
                if k == 'ARGS':
                    extra += val.split('+')
                else:
                    env[k] = val
            st = time.perf_counter()
            r = subprocess.run([env.get('BIN', B), 'synth', f'{D}/{t}.parquet', '--config', f'{D}/{t}.toml', '--columns', cols, '--epsilon', e, '--seed', str(seed), '--output', f'{tmp}/o.parquet', '--report', f'{tmp}/r.json', '--quiet', *extra], env=env, capture_output=True, text=True)
            secs = time.perf_counter() - st
            if r.returncode: sys.exit(r.stderr)
            fd = [l.split()[3] for l in r.stderr.splitlines() if l.startswith('DPS fixed depth')]
            rep = json.load(open(f'{tmp}/r.json'))
            cells = rep['parameters'].get('marginal_calibration', {}).get('adaptive', {}) or {}
            cells = cells.get('cells')
            subprocess.run([B, 'eval', '--real', f'{D}/{t}.parquet', '--synth', f'{tmp}/o.parquet', '--config', f'{D}/{t}.toml', '--columns', cols, '--seed', str(seed), '--json', f'{tmp}/e.json', '--quiet'], check=True, capture_output=True)
            ev = json.load(open(f'{tmp}/e.json'))
            m1 = next(x for x in ev['marginals'] if x['k'] == 1)
            m2 = next(x for x in ev['marginals'] if x['k'] == 2)
            row = dict(build=label, table=t, columns=cols, d=4, epsilon=e, seed=seed, variant='auto', seconds=round(secs, 2),
                       subsample_w1=ev['subsample_transport']['w1']['mean'], ratio_to_floor=ev['subsample_transport']['ratio_to_floor'],
                       pairwise_w1=ev['pairwise_w1']['mean'], max_1d_w1=max(c['w1'] for c in ev['columns']), tv_2way=m2['mean_tv'],
                       mean_error=ev['mean_error']['max_abs'], correlation_error=ev['correlation_error']['frobenius'],
                       rank_correlation_error=ev['rank_correlation_error']['frobenius'], tv_1d_mean=m1['mean_tv'], tv_1d_max=m1['max_tv'],
                       fixed_depth=fd[0] if fd else '', cells=' '.join(map(str, cells)) if cells else '')
            w.writerow(row); fh.flush()
            print(label, t, e, seed, 'sub %.4f max1d %.4f tv2 %.4f tv1 %.4f fd %s cells %s' % (row['subsample_w1'], row['max_1d_w1'], row['tv_2way'], row['tv_1d_mean'], row['fixed_depth'], row['cells']), flush=True)
