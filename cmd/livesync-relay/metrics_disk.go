package main

import (
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
)

// The data folder's filesystem, so that an alert can fire before a full
// disk fails the databases' writes (without a data folder, when every
// database is kept on CouchDB, these are absent).
var (
	descDataDirAvail = prometheus.NewDesc(metricsNamespace+"_data_dir_available_bytes",
		"Free space on the data folder's filesystem that the relay may use (as df shows it).", nil, nil)
	descDataDirSize = prometheus.NewDesc(metricsNamespace+"_data_dir_size_bytes",
		"Size of the data folder's filesystem.", nil, nil)
)

// dataDir is the folder of the bbolt files; "" without one.
func (h *heldDatabases) dataDir() string {
	if h == nil || h.dir == nil || h.dir.bolt == nil {
		return ""
	}
	// Path names a valid database's file in the folder.
	if p := h.dir.bolt.Path("vault"); p != "" {
		return filepath.Dir(p)
	}
	return ""
}

// collectDisk reports the data folder's filesystem where the platform
// says (diskSpace).
func (c *dbCollector) collectDisk(ch chan<- prometheus.Metric) {
	dir := c.dbs.dataDir()
	if dir == "" {
		return
	}
	if avail, size, ok := diskSpace(dir); ok {
		ch <- prometheus.MustNewConstMetric(descDataDirAvail, prometheus.GaugeValue, float64(avail))
		ch <- prometheus.MustNewConstMetric(descDataDirSize, prometheus.GaugeValue, float64(size))
	}
}
