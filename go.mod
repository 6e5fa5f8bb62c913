module github.com/livesync-go/livesync-go

go 1.26
