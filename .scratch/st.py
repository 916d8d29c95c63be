import re,sys,datetime
lines=open(sys.argv[1]).read().splitlines()
start=float(sys.argv[2])/1000; end=float(sys.argv[3])/1000
def ts(h,m,s):
    d=datetime.datetime.utcfromtimestamp(start)
    base=d.replace(hour=0,minute=0,second=0,microsecond=0).timestamp()
    return base+h*3600+m*60+s
first={}; name={}; ex={}
for l in lines:
    m=re.match(r'(\d+) (\d+):(\d+):(\d+\.\d+) (.*)',l)
    if not m: continue
    pid=m.group(1); t=ts(int(m.group(2)),int(m.group(3)),float(m.group(4))); rest=m.group(5)
    if rest.startswith('execve(') and '= 0' in rest or (rest.startswith('execve(') and 'resumed' not in rest):
        mm=re.match(r'execve\("([^"]+)", \[(.*?)\]',rest)
        if mm and pid not in first:
            first[pid]=t; name[pid]=mm.group(2)[:110]
    if 'exit_group' in rest:
        ex[pid]=t
for pid,t in sorted(first.items(), key=lambda x:x[1]):
    if start<=t<=end:
        e=ex.get(pid)
        print(f"{(t-start)*1000:8.1f} +{((e-t)*1000 if e else -1):7.1f} {name[pid]}")
