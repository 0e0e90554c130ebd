package sandboxtest

// FakeAgent is a Python program that takes the agent's place at its
// socket (/.flowbox-run/agent.sock, on bwrap and Docker alike) and answers
// every command with "forged" and exit code 0, framed as the agent's
// protocol frames them; it touches /workspace/fake-ready once it listens.
// The providers' attack tests run it in a sandbox to show that its
// answers are never taken.
const FakeAgent = `import os, socket, struct
p = '/.flowbox-run/agent.sock'
os.unlink(p)
s = socket.socket(socket.AF_UNIX)
s.bind(p)
s.listen(8)
open('/workspace/fake-ready', 'w').close()
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        c.recv(65536)
        c.sendall(b'\x01' + struct.pack('>I', 6) + b'forged' + b'\x03' + struct.pack('>I', 5) + struct.pack('>i', 0) + b'\x00')
    except Exception:
        pass
    c.close()
`
