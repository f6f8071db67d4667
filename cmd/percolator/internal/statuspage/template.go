package statuspage

import "html/template"

// pageTemplate is the page: sections in the order an operator looks,
// each saying so when the process cannot fill it. The ids and classes are
// what tests (and scrapers) find things by.
var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>percolator {{.Process}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.4em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; } th, td { padding: 2px 10px; text-align: right; } th:nth-child(-n+2), td:nth-child(-n+2) { text-align: left; }
th { background: #eee; } tr:nth-child(even) td { background: #f7f7f7; }
.unknown { color: #777; font-style: italic; } .error { color: #a00; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; } figure { margin: 0; }
figcaption { font-size: 0.9em; } svg.chart .frame { fill: #fafafa; stroke: #ccc; }
svg.chart polyline { fill: none; stroke: #1565c0; stroke-width: 1.5; } svg.chart circle { fill: #1565c0; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 1em; } dt { color: #555; } dd { margin: 0; }
</style>
</head>
<body>
<h1>percolator {{.Process}}{{with .About}} <small>{{.}}</small>{{end}}</h1>
<p id="sampled">{{if .Sampled}}Sampled {{.SampledAgo}} ago; every {{.Interval}}, charts over the last {{.Window}}. This page refreshes itself.{{else}}<span class="unknown">No sample yet: the first is being read.</span>{{end}}</p>

<h2>Observers</h2>
<section id="observers">
{{- if .Observers}}
<dl>
<dt>Notification lag</dt><dd id="lag">{{.Lag}}</dd>
<dt>Quarantined notifications</dt><dd id="quarantined">{{.Observers.Quarantined}}</dd>
</dl>
<table>
<tr><th>Observer</th><th>Column</th><th>Pending</th><th>Oldest</th><th>Runs</th><th>Runs/s</th><th>Failures</th><th>Quarantined</th></tr>
{{- range .ObserverRows}}
<tr data-observer="{{.Name}}"><td>{{.Name}}</td><td>{{.Column}}</td><td class="pending">{{.Pending}}</td><td>{{.Oldest}}</td><td class="runs">{{.Runs}}</td><td class="rate">{{.Rate}}</td><td class="failures">{{.Failures}}</td><td class="quarantined">{{.Quarantined}}</td></tr>
{{- else}}
<tr><td colspan="8" class="unknown">No observer registered.</td></tr>
{{- end}}
</table>
{{- else}}
<p class="unknown">{{.ObserversUnknown}}</p>
{{- end}}
</section>

<h2>Partitions and workers</h2>
<section id="workers">
{{- if .Observers}}
{{- if .Partitions}}
<table>
<tr><th>Partition</th><th>Owner</th><th>Worker</th><th>Range</th><th>Backlog</th><th>Published</th></tr>
{{- range .Partitions}}
<tr><td>{{.Part}}</td><td>{{.Owner}}</td><td>{{.Worker}}</td><td>{{.Range}}</td><td>{{.Backlog}}</td><td>{{.Age}} ago</td></tr>
{{- end}}
</table>
<p>Notified rows in no worker's range: {{.Observers.Unowned}}</p>
{{- else}}
<p>No worker publishes a partition: the scanners (of index, or of workers without --etcd) scan the notify keyspace from random places.</p>
{{- end}}
{{- else}}
<p class="unknown">{{.ObserversUnknown}}</p>
{{- end}}
</section>

<h2>Server</h2>
<section id="server">
{{- with .Server}}
<dl>
<dt>Sessions</dt><dd id="sessions">{{.Sessions}}</dd>
<dt>Advisory locks</dt><dd id="locks">{{.Locks}}</dd>
<dt>RPCs</dt><dd id="rpcs">{{$.RPCRate}}</dd>
<dt>Readable snapshots reach back</dt><dd id="gc-lag">{{if .GCLag}}{{.GCLag}}{{else}}(no collection yet){{end}}</dd>
</dl>
{{- else}}
<p class="unknown">{{.ServerUnknown}}</p>
{{- end}}
</section>

<h2>Oracle</h2>
<section id="oracle">
{{- with .Oracle}}
<p id="leader">{{.Leader}}{{if .Standby}} (standing by){{end}}</p>
{{- else}}
<p class="unknown">{{.OracleUnknown}}</p>
{{- end}}
</section>

<h2>Store</h2>
<section id="store">
{{- with .Store}}
<dl><dt>Size on disk</dt><dd id="store-size">{{$.StoreSize}}</dd><dt>Directory</dt><dd>{{.Dir}}</dd></dl>
{{- else}}
<p class="unknown">{{.StoreUnknown}}</p>
{{- end}}
</section>

<h2>Last {{.Window}}</h2>
<section id="charts" class="charts">
{{- range .Charts}}
<figure id="fig-{{.ID}}">
<figcaption>{{.Title}}: {{if .Unknown}}<span class="unknown">{{.Unknown}}</span>{{else}}<b>{{.Last}}</b> (max {{.Max}}){{end}}</figcaption>
{{if not .Unknown}}{{.SVG}}{{end}}
</figure>
{{- end}}
</section>
</body>
</html>
`))
