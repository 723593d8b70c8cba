int counter = 0, *p, limit[16];
double ratio = 2.5e-3;
struct point origin;

void tick(void) { counter = counter + 1; if (counter >= 16) { counter = 0; } else { ; } }

int sum(int a[], int n) {
    int s = 0, i = 0;
    while (i < n) s += a[i++];
    { int shadow = s; s = shadow; }
    return (s);
}
