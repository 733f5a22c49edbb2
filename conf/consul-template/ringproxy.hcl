# conf/consul-template/ringproxy.hcl -- ringproxy's backend list from
# Consul: consul-template renders ringproxy.ini.ctmpl to a new file beside
# the live one; the command checks it with `ringproxy -t` and only then
# moves it into place and reloads, so a bad render never replaces the file
# ringproxy runs on.
#   consul-template -config conf/consul-template/ringproxy.hcl
# Checked by tests/e2e/test_deploy.py (the template rendered for sample
# services passes ringproxy -t).
template {
  source      = "/etc/ringproxy/ringproxy.ini.ctmpl"
  destination = "/etc/ringproxy/ringproxy.ini.new"
  perms       = 0644
  # a quiet period, so a burst of catalog changes makes one reload
  wait {
    min = "2s"
    max = "10s"
  }
  command = "/usr/local/bin/ringproxy -t -c /etc/ringproxy/ringproxy.ini.new && mv /etc/ringproxy/ringproxy.ini.new /etc/ringproxy/ringproxy.ini && systemctl reload ringproxy"
  command_timeout = "30s"
}
