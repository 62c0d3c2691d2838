"""HTTP pieces both REST servers share (the netmaster API in `contivd.api`, netplugin's in
`contivd.agent_api`): request signing, the one exception → HTTP answer mapping, the forwarding
client. No routes live here."""
